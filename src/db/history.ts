/**
 * Finished tasks leave the hot table (docs/DESIGN.md §10; migrations/0014_history.sql):
 * every statement that finishes a task deletes its row from `sluice.tasks` and, in the same
 * statement, inserts it into the open bucket of `sluice.finished`, with the attempts it had
 * ended before folded in. This file holds that move, once, for every statement that finishes
 * tasks (settle, cancel, expiry), and the sweep that opens and drops buckets.
 */
import type { Queryable } from './db.ts';
import { UNFINISHED_SQL } from './rows.ts';

/**
 * A first CTE (`lock_order`, followed by a comma) for a statement that reads or writes history
 * before it names the hot table: Postgres locks a statement's tables in the order its text names
 * them, and every other statement names sluice.tasks first, then sluice.attempts, then
 * sluice.finished. One order everywhere, so that two statements never wait on each other's
 * tables (a TRUNCATE of them all, as the tests' cleanup makes, would otherwise deadlock).
 */
export const LOCK_ORDER_CTE = `lock_order as (select from sluice.tasks, sluice.attempts where false),`;

/**
 * CTEs (`<deleted>_attempts, <deleted>_archived`, no comma before or after) that put the rows
 * the CTE `deleted` removed from sluice.tasks into history. `deleted` returns `t.*` and:
 * `fin_status` (its final status), `fin_result`, `fin_error` (this ending's error), `fin_http_status`,
 * and whether a lease ended it, `fin_attempt` (false: the task was not leased; its final
 * attempt's outcome is its status), and that attempt's `fin_duration_ms`. Executed whether or not the query reads them (they modify data).
 */
export function archiveCtes(deleted: string): string {
  return `
${deleted}_attempts as (
  delete from sluice.attempts a using ${deleted} d where a.task_id = d.id
  returning a.*
),
${deleted}_archived as (
  insert into sluice.finished (bucket, id, queue, status, concurrency_key, priority, attempts, max_attempts, deferrals,
    resumes, finished_at, created_at, run_at, expires_at, cancel_requested_at, parent_id, schedule, schedule_slot,
    dedup_key, concurrency_limit, rate_limit, rate_period_ms, timeout_ms, lease_ms, last_lease_id, last_status, last_error, result,
    final_started_at, final_duration_ms, final_error, attempt_log, backoff_initial_ms, backoff_max_ms, backoff_factor,
    backoff_jitter, method, content_type, url, headers, body, callback, dedup_ttl_ms)
  select (select max(bucket) from sluice.history_buckets), d.id, d.queue, d.fin_status, d.concurrency_key, d.priority,
    d.attempts, d.max_attempts, d.deferrals, d.resumes, now(), d.created_at, d.run_at, d.expires_at, d.cancel_requested_at,
    d.parent_id, d.schedule, d.schedule_slot, d.dedup_key, d.concurrency_limit, d.rate_limit, d.rate_period_ms, d.timeout_ms,
    d.lease_ms, coalesce(d.lease_id, d.last_lease_id), d.fin_http_status, coalesce(d.fin_error, d.last_error), d.fin_result,
    case when d.fin_attempt then d.leased_at end, d.fin_duration_ms, d.fin_error,
    (select jsonb_agg(to_jsonb(a) - 'task_id' order by a.started_at, a.attempt) from ${deleted}_attempts a where a.task_id = d.id),
    d.backoff_initial_ms, d.backoff_max_ms, d.backoff_factor, d.backoff_jitter, d.method, d.content_type, d.url, d.headers, d.body,
    d.callback, d.dedup_ttl_ms
  from ${deleted} d
)`;
}

/**
 * What a DELETE … RETURNING gives `archiveCtes` for a task that ends without a lease ending it
 * (cancelled or expired while pending or waiting, or finished in place by an earlier version):
 * its final status is `status` (an SQL expression), everything else as it was.
 */
export function endedUnleased(status: string): string {
  return `t.*, ${status} as fin_status, t.result as fin_result, null::text as fin_error, t.last_status as fin_http_status,
          false as fin_attempt, null::integer as fin_duration_ms`;
}

/** Every ended attempt of a task, oldest first (a live task's in sluice.attempts, a finished one's on its row). */
export const ATTEMPTS_OF_TASK = `
select attempt, lease_id, started_at, ended_at, outcome, http_status, duration_ms, error
from sluice.all_attempts where task_id = $1
order by started_at, attempt`;

/**
 * Moves rows a dispatcher of an earlier version finished in place (tasks_stragglers), at most
 * `limit`; returns how many.
 */
export async function moveStragglers(db: Queryable, limit: number): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    `with picked as (
       select id from sluice.tasks where status not in ${UNFINISHED_SQL} order by id limit $1 for update skip locked
     ),
     done as (
       delete from sluice.tasks t using picked p where t.id = p.id
       returning ${endedUnleased('t.status')}
     ),${archiveCtes('done')}
     select count(*)::int as n from done`,
    [limit],
  );
  return row?.n ?? 0;
}

export interface HistorySweep {
  opened: number | null;
  dropped: number[];
}

/** Opens a new bucket when the open one is `widthMs` old; drops buckets closed more than `keepMs` ago (`null`: none). */
export async function historySweep(db: Queryable, widthMs: number, keepMs: number | null, now?: Date): Promise<HistorySweep> {
  const [row] = await db.query<{ r: HistorySweep }>('select sluice.history_sweep($1, $2, $3) as r', [
    Math.round(widthMs),
    keepMs === null ? null : Math.round(keepMs),
    now ?? null,
  ]);
  return row!.r;
}
