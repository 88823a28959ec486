/** Housekeeping each dispatcher run starts with: deadlines passed and leases expired. */
import type { LeasedTask } from '../core/types.ts';
import type { Queryable } from './db.ts';
import { archiveCtes, endedUnleased } from './history.ts';
import { type TaskRow, toTask } from './rows.ts';

/**
 * Marks pending tasks past their `expires_at` as expired, and returns leases that have
 * expired (oldest first), for the dispatcher to settle as timed-out attempts.
 */
export async function reapOverdue(db: Queryable, maxLeases: number): Promise<LeasedTask[]> {
  const rows = await db.query<TaskRow>(
    `with expired as (
       delete from sluice.tasks t
       where status = 'pending' and expires_at is not null and expires_at <= now()
       returning ${endedUnleased("'expired'")}
     ),${archiveCtes('expired')}
     select * from sluice.tasks
     where status = 'leased' and lease_expires_at <= now()
     order by lease_expires_at
     limit $1`,
    [maxLeases],
  );
  return rows.map((r) => toTask(r) as LeasedTask);
}
