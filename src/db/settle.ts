/**
 * Ending leases. Every write names the lease (compare-and-set on task id, lease id and the
 * leased status), so a writer whose lease is gone changes nothing. A lease that ends in a retry,
 * a deferral or a release leaves a row in `sluice.attempts`; one that finishes its task moves
 * the task into history with that attempt as its final one (db/history.ts).
 */
import type { Settlement } from '../core/outcome.ts';
import type { TaskStatus } from '../core/types.ts';
import { prepared, type Queryable } from './db.ts';
import { archiveCtes } from './history.ts';
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

/** As the caller asks: a lease not yet past its expiry, one past it, or either. */
const LEASE_STILL_MATCHES = `case s.require when 'unexpired' then t.lease_expires_at > now()
                                 when 'expired' then t.lease_expires_at <= now()
                                 else true end`;

const SETTLE = prepared(
  'settle',
  `
with input as (
  -- An ending without a push's duration (a lease call, expiry) lasted from the lease's start until now.
  select s.*, coalesce(s.duration_ms, (extract(epoch from now() - s.leased_at) * 1000)::integer) as took_ms
  from jsonb_to_recordset($1::jsonb) as s(
    id bigint, lease_id uuid, require text, leased_at timestamptz, attempt integer, status text, outcome text,
    wait_ms double precision, attempts_delta integer, deferrals_delta integer, result text, error text,
    http_status integer, duration_ms integer)
),
-- Leases that end in a retry, a deferral or a release, locked while still held: what follows
-- reads each row as it is now, and a cancel asked for meanwhile turns the retry into the end.
-- A success or a death ends the task whatever: its delete below needs no lock first.
held as (
  select s.*, t.cancel_requested_at is not null as final
  from sluice.tasks t join input s on t.id = s.id and t.lease_id = s.lease_id
  where s.status = 'pending' and t.status = 'leased' and ${LEASE_STILL_MATCHES}
  for update of t
),
done as (
  delete from sluice.tasks t using input s left join held h on h.id = s.id
  where t.id = s.id and t.lease_id = s.lease_id and t.status = 'leased' and ${LEASE_STILL_MATCHES}
    and (s.status <> 'pending' or h.final)
  returning t.*, case when s.status = 'pending' then 'cancelled' else s.status end as fin_status, s.result as fin_result,
            s.error as fin_error, s.http_status as fin_http_status,
            true as fin_attempt, s.took_ms as fin_duration_ms
),${archiveCtes('done')},
settled as (
  update sluice.tasks t
  set status = 'pending',
      -- Never due before now: due at once, its lane's hint is lowered below (db/lanes.ts);
      -- due later, the claim pass that finds it due promotes it.
      run_at = now() + make_interval(secs => greatest(s.wait_ms, 0) / 1000.0),
      attempts = t.attempts + s.attempts_delta,
      deferrals = t.deferrals + s.deferrals_delta,
      result = null,
      last_error = coalesce(s.error, t.last_error),
      last_status = s.http_status,
      last_lease_id = t.lease_id,
      lease_id = null,
      leased_at = null,
      lease_expires_at = null,
      updated_at = now()
  from held s
  where t.id = s.id and not s.final
  returning t.id, t.status, t.queue, t.lane, t.priority, t.run_at
),
history as (
  insert into sluice.attempts (task_id, attempt, lease_id, started_at, outcome, http_status, duration_ms, error)
  select s.id, s.attempt, s.lease_id, s.leased_at, s.outcome, s.http_status, s.took_ms, s.error
  from settled st join held s on s.id = st.id
),${lowerHintsCte('settled')}
select id::text as id, status from settled
union all
select id::text, fin_status from done`,
);

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
