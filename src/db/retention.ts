/** Rate-limit grants past their period count against nothing (0011_rate_limits.sql): deleted by each sweep. */
import type { Queryable } from './db.ts';

/** Deletes the rate-limit grants whose period is over; returns how many. */
export async function rateGrantsSweep(db: Queryable): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    'with gone as (delete from sluice.rate_grants where until < now() returning 1) select count(*)::int as n from gone',
  );
  return row?.n ?? 0;
}
