/**
 * Ending leases. Every write names the lease (compare-and-set on task id, lease id and the
 * leased status), so a writer whose lease is gone changes nothing. Each lease that ends leaves
 * one row in `sluice.attempts`: the outcome of that attempt.
 */
import type { Settlement } from '../core/outcome.ts';
import type { TaskStatus } from '../core/types.ts';
import type { Queryable } from './db.ts';
import { lowerHintsCte } from './lanes.ts';

export interface LeaseSettlement {
  taskId: string;
  leaseId: string;
  /** When the lease began, and the attempt it carried (the task's attempt count at the time). */
  leasedAt: Date;
  attempt: number;
  settlement: Settlement;
  /** How long the push took; `null` = from the lease's start until now (lease calls, expiry). */
  durationMs: number | null;
  /**
   * `unexpired`: only a lease not yet past its expiry (lease calls: an expired lease is lost).
   * `expired`: only a lease past it (the reaper: a heartbeat that just landed wins).
   * Default: either (the dispatcher's own result of a push it made within the lease).
   */
  require?: 'unexpired' | 'expired';
}

const SETTLE = `
with input as (
  select * from jsonb_to_recordset($1::jsonb) as s(
    id bigint, lease_id uuid, require text, leased_at timestamptz, attempt integer, status text, outcome text,
    wait_ms double precision, attempts_delta integer, deferrals_delta integer, result text, error text,
    http_status integer, duration_ms integer)
),
settled as (
  update sluice.tasks t
  set status = case when s.status = 'pending' and t.cancel_requested_at is not null then 'cancelled' else s.status end,
      -- Never due before now: due at once, its lane's hint is lowered below (db/lanes.ts);
      -- due later, the claim pass that finds it due promotes it.
      run_at = case when s.status = 'pending' then now() + make_interval(secs => greatest(s.wait_ms, 0) / 1000.0) else t.run_at end,
      attempts = t.attempts + s.attempts_delta,
      deferrals = t.deferrals + s.deferrals_delta,
      result = s.result,
      last_error = coalesce(s.error, t.last_error),
      last_status = s.http_status,
      last_lease_id = t.lease_id,
      lease_id = null,
      leased_at = null,
      lease_expires_at = null,
      finished_at = case when s.status = 'pending' and t.cancel_requested_at is null then null else now() end,
      updated_at = now()
  from input s
  where t.id = s.id and t.lease_id = s.lease_id and t.status = 'leased'
    and case s.require when 'unexpired' then t.lease_expires_at > now()
                       when 'expired' then t.lease_expires_at <= now()
                       else true end
  returning t.id, t.status, t.last_lease_id, t.queue, t.lane, t.priority, t.run_at
),
history as (
  insert into sluice.attempts (task_id, attempt, lease_id, started_at, outcome, http_status, duration_ms, error)
  select s.id, s.attempt, s.lease_id, s.leased_at,
         case when st.status = 'cancelled' then 'cancelled' else s.outcome end,
         s.http_status,
         coalesce(s.duration_ms, (extract(epoch from now() - s.leased_at) * 1000)::integer),
         s.error
  from settled st join input s on s.id = st.id and s.lease_id = st.last_lease_id
  on conflict (task_id, lease_id) do nothing
),${lowerHintsCte('settled')}
select id::text as id, status from settled`;

/** What became of the attempt, for its history row. */
function outcomeOf(s: Settlement): string {
  return s.status === 'pending' ? s.reason : s.status;
}

/**
 * Settles leases in one statement. Returns, for each task whose lease was still held, the
 * status it has now (a retry may have become a cancellation), so no caller reads it again.
 */
export async function leaseSettleMany(db: Queryable, items: readonly LeaseSettlement[]): Promise<Map<string, TaskStatus>> {
  if (items.length === 0) return new Map();
  // A retry's due time was decided on this process's clock; the database keeps due times on
  // its own. What travels is the wait, so a clock ahead of or behind the database's neither
  // stretches nor skips a backoff, a Retry-After or a release's delay.
  const clockMs = Date.now();
  const input = items.map(({ taskId, leaseId, leasedAt, attempt, settlement: s, durationMs, require }) => ({
    id: taskId,
    lease_id: leaseId,
    require: require ?? null,
    leased_at: leasedAt.toISOString(),
    attempt,
    status: s.status,
    outcome: outcomeOf(s),
    wait_ms: s.status === 'pending' ? s.runAt.getTime() - clockMs : null,
    attempts_delta: s.status === 'pending' ? s.attemptsDelta : 0,
    deferrals_delta: s.status === 'pending' ? s.deferralsDelta : 0,
    result: s.status === 'succeeded' ? s.result : null,
    error: s.status === 'succeeded' ? null : s.error,
    http_status: s.httpStatus,
    duration_ms: durationMs === null ? null : Math.round(durationMs),
  }));
  const rows = await db.query<{ id: string; status: TaskStatus }>(SETTLE, [JSON.stringify(input)]);
  return new Map(rows.map((r) => [r.id, r.status]));
}
