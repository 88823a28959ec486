/** Housekeeping each dispatcher run starts with: deadlines passed and leases expired. */
import type { LeasedTask } from '../core/types.ts';
import type { Queryable } from './db.ts';
import { archiveCtes } from './history.ts';
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
       returning t.*, 'expired' as fin_status, t.result as fin_result, null::text as fin_error, t.last_status as fin_http_status,
                 false as fin_attempt, null::integer as fin_duration_ms
     ),${archiveCtes('expired')}
     select * from sluice.tasks
     where status = 'leased' and lease_expires_at <= now()
     order by lease_expires_at
     limit $1`,
    [maxLeases],
  );
  return rows.map((r) => toTask(r) as LeasedTask);
}
