/**
 * Retention: deleting finished tasks (and, by cascade, their attempts) once they are older
 * than the retention window. In small batches, oldest first (by an index of finish times),
 * skipping rows another sweeper holds, so that sweeps by several dispatchers neither wait nor
 * collide.
 */
import type { Queryable } from './db.ts';

const SWEEP = `
with doomed as (
  select id from sluice.tasks
  where finished_at is not null and finished_at < now() - make_interval(secs => $1 / 1000.0)
  order by finished_at
  limit $2
  for update skip locked
),
deleted as (
  delete from sluice.tasks t using doomed where t.id = doomed.id returning 1
)
select count(*)::int as n from deleted`;

/** Deletes the rate-limit grants whose period is over: they count against nothing (0011_rate_limits.sql). */
export async function rateGrantsSweep(db: Queryable): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    'with gone as (delete from sluice.rate_grants where until < now() returning 1) select count(*)::int as n from gone',
  );
  return row?.n ?? 0;
}

/** Deletes up to `limit` tasks that finished more than `retentionMs` ago; returns how many. */
export async function finishedSweep(db: Queryable, retentionMs: number, limit: number): Promise<number> {
  const [row] = await db.query<{ n: number }>(SWEEP, [retentionMs, limit]);
  return row?.n ?? 0;
}
