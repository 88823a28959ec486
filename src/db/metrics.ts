/**
 * Metrics in Postgres (migrations/0009_metrics.sql): counters added in batches, task counts
 * refreshed now and then, and the one read a scrape makes. A scrape reads the counters, the
 * counts, the leased rows (few: at most the limits' sum, through a partial index) and the
 * endpoint origins (few: their sweep drops idle ones), never the tasks table as a whole.
 */

import type { EndpointState } from '../core/outcome.ts';
import type { Queryable } from './db.ts';
import { ENDPOINT_STATE_SQL } from './endpoints.ts';
import { LOCK_ORDER_CTE } from './history.ts';
import { ADVISORY_LOCKS } from './locks.ts';

export interface CounterRow {
  metric: string;
  queue: string;
  label: string;
  value: number;
}

/** Adds to the counters, creating them; rows in key order, so concurrent writers never deadlock. */
/** Pushes to one origin since the last write: its attempts in the current minute (0027_endpoints.sql). */
export interface OriginAttempts {
  origin: string;
  attempts: number;
}

/**
 * Adds counts in one statement: the counters, and the pushes each origin had this minute
 * (`endpoint_minutes`, the window of GET /v1/endpoints): counted here, never in the settle, so
 * that a healthy origin costs its pushes' settles nothing.
 */
export async function countersAdd(db: Queryable, rows: readonly CounterRow[], origins: readonly OriginAttempts[] = []): Promise<void> {
  if (rows.length === 0 && origins.length === 0) return;
  await db.query(
    `with known as (
       -- Every origin pushed to is known (listed as healthy), and touched at most once a minute:
       -- the sweep forgets an origin untouched for an hour.
       insert into sluice.endpoints as e (origin)
       select origin from unnest($5::text[]) as o(origin) order by 1
       on conflict (origin) do update set touched_at = now() where e.touched_at < now() - interval '1 minute'
     ),
     minutes as (
       insert into sluice.endpoint_minutes as m (origin, minute, attempts)
       select o.origin, date_trunc('minute', now()), o.attempts from unnest($5::text[], $6::integer[]) as o(origin, attempts)
       order by 1
       on conflict (origin, minute) do update set attempts = m.attempts + excluded.attempts
     )
     insert into sluice.counters as c (metric, queue, label, value)
     select * from unnest($1::text[], $2::text[], $3::text[], $4::float8[]) as r(metric, queue, label, value)
     order by 1, 2, 3
     on conflict (metric, queue, label) do update set value = c.value + excluded.value`,
    [
      rows.map((r) => r.metric),
      rows.map((r) => r.queue),
      rows.map((r) => r.label),
      rows.map((r) => r.value),
      origins.map((o) => o.origin),
      origins.map((o) => o.attempts),
    ],
  );
}

/**
 * Counts tasks per queue and status into `sluice.task_counts` (queues and statuses gone drop
 * out). One dispatcher at a time, and not again within `freshMs` of the last count, however many
 * dispatchers run: the count reads the live tasks and the open history bucket whole; a closed
 * bucket is counted once.
 */
export async function taskCountsRefresh(db: Queryable, freshMs = 10_000): Promise<void> {
  await db.query(
    `with ${LOCK_ORDER_CTE}
     go as materialized (
       select pg_try_advisory_xact_lock(${ADVISORY_LOCKS.counts})
              and coalesce((select max(counted_at) from sluice.task_counts), '-infinity') < now() - make_interval(secs => $1 / 1000.0) as yes
     ),
     -- A closed history bucket is counted once: its rows no longer change (a redrive clears the count).
     closed as (
       update sluice.history_buckets b
       set counts = coalesce((select jsonb_agg(jsonb_build_array(c.queue, c.status, c.n)) from (
                               select queue, status, count(*) as n from sluice.finished f where f.bucket = b.bucket group by queue, status
                             ) c), '[]')
       where (select yes from go) and b.closed_at is not null and b.counts is null
       returning b.counts
     ),
     fresh as (
       select queue, status, sum(n)::bigint as n from (
         select queue, status, count(*) as n from sluice.tasks where (select yes from go) group by queue, status
         union all
         select queue, status, count(*) from sluice.finished
         where (select yes from go) and bucket = (select max(bucket) from sluice.history_buckets) group by queue, status
         union all
         select c ->> 0, c ->> 1, (c ->> 2)::bigint from sluice.history_buckets b, jsonb_array_elements(b.counts) c
         where (select yes from go) and b.closed_at is not null
         union all
         select c ->> 0, c ->> 1, (c ->> 2)::bigint from closed, jsonb_array_elements(closed.counts) c
       ) x
       group by queue, status
     ),
     gone as (
       delete from sluice.task_counts c
       where (select yes from go) and not exists (select 1 from fresh f where f.queue = c.queue and f.status = c.status)
     )
     insert into sluice.task_counts as c (queue, status, n, counted_at)
     select queue, status, n, clock_timestamp() from fresh order by queue, status
     on conflict (queue, status) do update set n = excluded.n, counted_at = excluded.counted_at`,
    [freshMs],
  );
}

export interface KeySlots {
  queue: string;
  key: string;
  active: number;
  /** The key's run-time override, and the limit its first task gave. */
  override: number | null;
  taskLimit: number | null;
}

export interface MetricsRead {
  counters: CounterRow[];
  taskCounts: Array<{ queue: string; status: string; n: number }>;
  /** When the task counts were made (`null`: never yet). */
  countedAt: Date | null;
  /** Live leases (unexpired) per queue: slots held now. */
  leased: Map<string, number>;
  /** Tasks waiting on children that hold their queue's slot (did not lend it), per queue. */
  waiting: Map<string, number>;
  /** Per queue, the keys holding the most slots (at most `topKeys` each). */
  keys: KeySlots[];
  /** Levels with a learnt limit or a hold now (0016_levels.sql); `key` null for the queue's own. */
  learnt: Array<{ queue: string; key: string | null; effective: number | null; held: boolean }>;
  /**
   * Endpoint origins (0027_endpoints.sql), at most `topEndpoints`: those paused or probing
   * first, then those with the most failures; `failures`: since the row was made.
   */
  endpoints: Array<{ origin: string; state: EndpointState; failures: number }>;
}

/** Everything a scrape shows, in one round trip. */
export async function metricsRead(db: Queryable, topKeys: number, topEndpoints = 0): Promise<MetricsRead> {
  const [row] = await db.query<{
    counters: CounterRow[] | null;
    counts: Array<{ queue: string; status: string; n: number; counted_at: string }> | null;
    leased: Array<{ queue: string; n: number }> | null;
    waiting: Array<{ queue: string; n: number }> | null;
    keys: Array<{ queue: string; key: string; n: number; override: number | null; task_limit: number | null }> | null;
    learnt: Array<{ queue: string; key: string | null; effective: number | null; held: boolean }> | null;
    endpoints: Array<{ origin: string; state: EndpointState; failures: number }> | null;
  }>(
    `with live as (
       select queue, lane, count(*)::int as n from sluice.tasks
       where status = 'leased' and lease_expires_at > now() group by queue, lane
     ),
     top as (
       select queue, lane, n from (
         select l.*, row_number() over (partition by queue order by n desc, lane) as place from live l where lane <> ''
       ) x where place <= $1
     )
     select
       (select json_agg(json_build_object('metric', metric, 'queue', queue, 'label', label, 'value', value)) from sluice.counters) as counters,
       (select json_agg(json_build_object('queue', queue, 'status', status, 'n', n, 'counted_at', counted_at)) from sluice.task_counts) as counts,
       (select json_agg(json_build_object('queue', queue, 'n', n)) from (select queue, sum(n)::int as n from live group by queue) q) as leased,
       (select json_agg(json_build_object('queue', queue, 'n', n))
          from (select queue, count(*)::int as n from sluice.tasks where status = 'waiting' and not lent_queue group by queue) w) as waiting,
       (select json_agg(json_build_object('queue', t.queue, 'key', substr(t.lane, 3), 'n', t.n, 'override', kl."limit", 'task_limit', k.task_limit))
          from top t
          left join sluice.lanes k on k.queue = t.queue and k.lane = t.lane
          left join sluice.key_limits kl on kl.queue = t.queue and kl.concurrency_key = substr(t.lane, 3)) as keys,
       (select json_agg(json_build_object('queue', queue, 'key', case when lane = '*' then null else substr(lane, 3) end,
                                          'effective', effective, 'held', coalesce(held_until > now(), false)) order by queue, lane)
          from sluice.levels where effective is not null or held_until > now()) as learnt,
       (select json_agg(json_build_object('origin', origin, 'state', state, 'failures', failures) order by place)
          from (select e.origin, ${ENDPOINT_STATE_SQL} as state, e.failures_total as failures,
                       row_number() over (order by e.paused_until is not null desc, e.failures_total desc, e.origin) as place
                from sluice.endpoints e
                order by place limit $2) x) as endpoints`,
    [topKeys, topEndpoints],
  );
  const counts = row?.counts ?? [];
  const countedAt = counts.reduce<number | null>((min, c) => Math.min(min ?? Number.POSITIVE_INFINITY, Date.parse(c.counted_at)), null);
  return {
    counters: row?.counters ?? [],
    taskCounts: counts.map(({ queue, status, n }) => ({ queue, status, n: Number(n) })),
    countedAt: countedAt === null ? null : new Date(countedAt),
    leased: new Map((row?.leased ?? []).map((l) => [l.queue, l.n])),
    waiting: new Map((row?.waiting ?? []).map((w) => [w.queue, w.n])),
    keys: (row?.keys ?? []).map((k) => ({ queue: k.queue, key: k.key, active: k.n, override: k.override, taskLimit: k.task_limit })),
    learnt: row?.learnt ?? [],
    endpoints: row?.endpoints ?? [],
  };
}
