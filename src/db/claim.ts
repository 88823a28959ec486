/** One claim pass: a single round trip to `sluice.claim` (see migrations/). */
import type { LeasedTask } from '../core/types.ts';
import type { Queryable } from './db.ts';
import { type TaskRow, toTask } from './rows.ts';

/** Leases up to `max` ready tasks, best first; each claim counts the attempt it starts. */
export async function taskClaimBatch(db: Queryable, max: number): Promise<LeasedTask[]> {
  if (max <= 0) return [];
  const rows = await db.query<TaskRow>('select * from sluice.claim($1)', [max]);
  return rows.map((r) => toTask(r) as LeasedTask);
}
