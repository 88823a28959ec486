/**
 * Dedup keys that outlive their task (migrations/0024_dedup_ttl.sql, functions/dedup.sql;
 * docs/DESIGN.md §2): a task enqueued with `dedup_ttl_ms` holds its key until that long after it
 * finishes. Its record is its own history row, so what the enqueue asks of history is here: does
 * a finished task hold this key (in the insert, and again once the insert is done), and which.
 */
import { UNFINISHED_SQL } from './rows.ts';

/**
 * "The finished task `f` holds its key now": its TTL runs from its `finished_at`, on the
 * database's clock; only buckets made since 0024 and closed within the longest TTL are read.
 */
const FINISHED_HOLDS = `f.dedup_ttl_ms is not null and f.finished_at > now() - make_interval(secs => f.dedup_ttl_ms / 1000.0)
      and f.bucket >= (select sluice.dedup_first_bucket())`;

/**
 * "No finished task holds the key of the row `x`" (`queue`, `dedup_key`), for the insert's filter:
 * looked up row by row, for the rows with a key only. (`offset 0` keeps the planner from making
 * it one hash of every finished task with a TTL, which it may when its statistics say few.)
 */
export function keyNotHeldAfterFinish(x: string): string {
  return `(${x}.dedup_key is null or not exists (
      select 1 from sluice.finished f where f.queue = ${x}.queue and f.dedup_key = ${x}.dedup_key and ${FINISHED_HOLDS} offset 0))`;
}

/**
 * A CTE, `dedup_raced (held_queue, held_key)`: the keys of the rows the CTE `inserted` wrote
 * (joined to `input` by `new_id`) that a finished task holds as seen once the insert is done,
 * with a snapshot of its own (`sluice.dedup_held_finished`). A task of such a key finished while
 * the insert ran: its history row was not in the insert's snapshot, and its unfinished row was
 * gone by the time the insert met it. The enqueue is then tried again, and answers that task.
 */
export const DEDUP_RACED_CTE = `dedup_raced as (
  select h.held_queue, h.held_key
  from (select array_agg(i.queue) as queues, array_agg(i.dedup_key) as keys
        from input i join inserted t on t.id = i.new_id where i.dedup_key is not null) mine,
       sluice.dedup_held_finished(mine.queues, mine.keys) h
)`;

/**
 * The task that holds each key (`$1` queues, `$2` keys, a pair per index): the unfinished one,
 * else the finished one that holds it still (the latest to finish); `columns` of `sluice.all_tasks t`,
 * after `dedup_queue` and `dedup_match`. A key nothing holds has no row.
 */
export function dedupHoldersSql(columns: string): string {
  return `
with holder as materialized (
  select k.queue, k.dedup_key, coalesce(
    (select u.id from sluice.tasks u where u.queue = k.queue and u.dedup_key = k.dedup_key and u.status in ${UNFINISHED_SQL}),
    (select f.id from sluice.finished f where f.queue = k.queue and f.dedup_key = k.dedup_key and ${FINISHED_HOLDS}
     order by f.finished_at desc limit 1)) as id
  from unnest($1::text[], $2::text[]) as k(queue, dedup_key)
)
select h.queue as dedup_queue, h.dedup_key as dedup_match, ${columns}
from holder h join sluice.all_tasks t on t.id = h.id`;
}
