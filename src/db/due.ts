/**
 * When the next thing comes due (docs/DESIGN.md §6): the earliest `run_at` of a pending task
 * (delayed, retried, deferred) not yet seen by a claim pass, the earliest lease expiry, and
 * the end of a rate limit's oldest grant or of a level's hold where due tasks wait for it: an
 * index probe (`tasks_delayed`) and a scan of the leased rows' index (`tasks_lane_leased`;
 * leased rows are bounded by the limits), measured on the database's clock so that a
 * dispatcher whose clock differs still wakes on time.
 */
import type { Queryable } from './db.ts';

// "Future" is measured from the last claim pass (any dispatcher's), not from now: a task that
// came due after that pass but before this probe was never looked at, so it is due now (0).
// One that came due before it was looked at and left: only a lease end or a limit change,
// which poke, can free it.
const NEXT_DUE = `
select (extract(epoch from least(
  (select run_at from sluice.tasks
   where status = 'pending' and run_at > created_at and run_at > (select promoted_to from sluice.promotion)
   order by run_at limit 1),
  -- The next slot of a schedule (0010_schedules.sql): it fires then.
  (select next_fire_at from sluice.schedules where next_fire_at is not null order by next_fire_at limit 1),
  (select lease_expires_at from sluice.tasks where status = 'leased' order by lease_expires_at limit 1),
  -- A rate-limited level has room again when its oldest live grant ends: the first such end
  -- at a level with due tasks (0011_rate_limits.sql).
  (select g.until from sluice.rate_grants g
   where g.until > statement_timestamp()
     and exists (select 1 from sluice.lanes k where k.queue = g.queue and k.head_priority is not null and (g.lane = '*' or k.lane = g.lane))
   order by g.until limit 1),
  -- A rate's bucket (0017_rate_burst.sql) at a level with due tasks: its next token.
  (select rb.next_at from sluice.rate_buckets rb
   where rb.next_at > statement_timestamp()
     and exists (select 1 from sluice.lanes k where k.queue = rb.queue and k.head_priority is not null and (rb.lane = '*' or k.lane = rb.lane))
   order by rb.next_at limit 1),
  -- A held level (a Retry-After, 0016_levels.sql) with due tasks: free when its hold ends.
  (select lv.held_until from sluice.levels lv
   where lv.held_until > statement_timestamp()
     and exists (select 1 from sluice.lanes k where k.queue = lv.queue and k.head_priority is not null and (lv.lane = '*' or k.lane = lv.lane))
   order by lv.held_until limit 1)
) - clock_timestamp()) * 1000)::float8 as due_in_ms`;

/**
 * Milliseconds until the next pending task comes due, the next lease expires (0 when a lease
 * has expired already) or a rate limit holding due tasks has room again; `null` when nothing is
 * waiting on time. Due work blocked by a concurrency limit is not counted: only a lease end or
 * a limit change frees it, and those poke.
 */
export async function nextDueInMs(db: Queryable): Promise<number | null> {
  const [row] = await db.query<{ due_in_ms: number | null }>(NEXT_DUE);
  const ms = row?.due_in_ms ?? null;
  return ms === null ? null : Math.max(0, Math.ceil(ms));
}
