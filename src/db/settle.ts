/**
 * Ending leases. Every write names the lease (compare-and-set on task id, lease id and the
 * leased status), so a writer whose lease is gone changes nothing.
 */
import type { Settlement } from '../core/outcome.ts';
import type { Queryable } from './db.ts';

export interface LeaseSettlement {
  taskId: string;
  leaseId: string;
  settlement: Settlement;
}

const SETTLE = `
update sluice.tasks t
set status = case when s.status = 'pending' and t.cancel_requested_at is not null then 'cancelled' else s.status end,
    run_at = coalesce(s.run_at, t.run_at),
    attempts = t.attempts + s.attempts_delta,
    deferrals = t.deferrals + s.deferrals_delta,
    result = s.result,
    last_error = coalesce(s.error, t.last_error),
    last_status = s.http_status,
    lease_id = null,
    leased_at = null,
    lease_expires_at = null,
    finished_at = case when s.status = 'pending' and t.cancel_requested_at is null then null else now() end,
    updated_at = now()
from jsonb_to_recordset($1::jsonb) as s(
  id bigint, lease_id uuid, status text, run_at timestamptz, attempts_delta integer,
  deferrals_delta integer, result text, error text, http_status integer)
where t.id = s.id and t.lease_id = s.lease_id and t.status = 'leased'
returning t.id::text as id`;

/** Settles leases in one statement; returns the ids of the tasks whose lease was still held. */
export async function leaseSettleMany(db: Queryable, items: readonly LeaseSettlement[]): Promise<Set<string>> {
  if (items.length === 0) return new Set();
  const input = items.map(({ taskId, leaseId, settlement: s }) => ({
    id: taskId,
    lease_id: leaseId,
    status: s.status,
    run_at: s.status === 'pending' ? s.runAt.toISOString() : null,
    attempts_delta: s.status === 'pending' ? s.attemptsDelta : 0,
    deferrals_delta: s.status === 'pending' ? s.deferralsDelta : 0,
    result: s.status === 'succeeded' ? s.result : null,
    error: s.status === 'succeeded' ? null : s.error,
    http_status: s.httpStatus,
  }));
  const rows = await db.query<{ id: string }>(SETTLE, [JSON.stringify(input)]);
  return new Set(rows.map((r) => r.id));
}
