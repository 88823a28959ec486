/**
 * Ending leases. Every write names the lease (compare-and-set on task id, lease id and the
 * leased status), so a writer whose lease is gone changes nothing. A lease that ends in a retry,
 * a deferral or a release leaves a row in `sluice.attempts`; one that finishes its task moves
 * the task into history with that attempt as its final one (db/history.ts).
 */
import type { Settlement, Signal } from '../core/outcome.ts';
import { LIMITS, type TaskStatus } from '../core/types.ts';
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
  /** What the push's answer says of the endpoint's capacity (core/outcome.ts `pushSignal`); pushes only. */
  signal?: Signal | null;
}

/** As the caller asks: a lease not yet past its expiry, one past it, or either. */
const LEASE_STILL_MATCHES = `case s.require when 'unexpired' then t.lease_expires_at > now()
                                 when 'expired' then t.lease_expires_at <= now()
                                 else true end`;

/**
 * What the settled pushes' signals teach their levels (0016_levels.sql), one row per level,
 * locked in (queue, lane) order. \`n\` is the level's leases in flight (those ending now included).
 * - An overload from a lease that began after the level was last lowered lowers it by a quarter
 *   (β = 0.75, as CUBIC's, where TCP Reno halves: the sawtooth between capacity and ¾ of it
 *   keeps ~87% of the endpoint's capacity in use), from what it had in flight if that is less,
 *   never below 1. Older ones were in flight under the old limit: that cut answered them already.
 * - A window of successes (as many as the limit, at least ${GROWTH_WINDOW_MIN}) adds one, when the
 *   level was using at least half of its limit (a level its tasks do not fill learns nothing).
 * - A Retry-After (\`hold\`) holds the level until then, adaptive or not.
 * A level's first row comes from its first overload or hold; successes alone never make one.
 */
/** The fewest successes that raise a learnt limit: a level at 2 would otherwise probe every other push. */
const GROWTH_WINDOW_MIN = 8;

const LEVELS_LEARN = `
signals as (
  select i.queue, i.level,
         count(*) filter (where i.signal = 'overload' and i.adaptive) as overloads,
         max(i.leased_at) filter (where i.signal = 'overload' and i.adaptive) as overload_leased_at,
         count(*) filter (where i.signal = 'ok' and i.adaptive) as oks,
         max(now() + make_interval(secs => greatest(i.wait_ms, 0) / 1000.0)) filter (where i.signal = 'hold') as hold_until,
         max(i.http_status) filter (where i.signal in ('overload', 'hold')) as http_status,
         (select count(*)::integer from sluice.tasks t
          where t.status = 'leased' and t.queue = i.queue and (i.level = '*' or t.lane = i.level)) as n
  from input i
  where i.queue is not null and ((i.adaptive and i.signal in ('overload', 'ok')) or i.signal = 'hold')
  group by i.queue, i.level
),
level_rows as (
  select lv.queue, lv.lane from sluice.levels lv join signals sg on sg.queue = lv.queue and sg.level = lv.lane
  order by lv.queue, lv.lane
  for update of lv
),
learnt as (
  update sluice.levels lv
  set effective = m.effective, successes = m.successes, decreased_at = m.decreased_at,
      held_until = m.held_until, reason = m.reason, moved_at = m.moved_at
  from level_rows lr
  join signals sg on sg.queue = lr.queue and sg.level = lr.lane
  join sluice.levels old on old.queue = lr.queue and old.lane = lr.lane
  cross join lateral (
    select sg.overloads > 0 and (old.decreased_at is null or sg.overload_leased_at >= old.decreased_at) as lower,
           old.effective is not null and old.successes + sg.oks >= greatest(old.effective, ${GROWTH_WINDOW_MIN})
             and sg.n * 2 >= old.effective as grow,
           sg.hold_until > coalesce(old.held_until, '-infinity') as hold
  ) d
  cross join lateral (
    select case when d.lower then greatest(1, least(coalesce(old.effective, sg.n), sg.n) * 3 / 4)
                when d.grow then old.effective + 1
                else old.effective end as effective,
           case when d.lower or d.grow then 0 else old.successes + sg.oks end as successes,
           case when d.lower then now() else old.decreased_at end as decreased_at,
           case when d.hold then sg.hold_until else old.held_until end as held_until,
           case when d.lower then 'lowered: ' || coalesce('HTTP ' || sg.http_status, 'connection refused')
                when d.grow then 'raised: a window of successes'
                when d.hold then 'held: Retry-After from HTTP ' || sg.http_status
                else old.reason end as reason,
           case when d.lower or d.grow or d.hold then now() else old.moved_at end as moved_at
  ) m
  where lv.queue = lr.queue and lv.lane = lr.lane
),
first_rows as (
  insert into sluice.levels (queue, lane, effective, decreased_at, held_until, reason, moved_at)
  select sg.queue, sg.level,
         case when sg.overloads > 0 then greatest(1, sg.n * 3 / 4) end,
         case when sg.overloads > 0 then now() end,
         sg.hold_until,
         case when sg.overloads > 0 then 'lowered: ' || coalesce('HTTP ' || sg.http_status, 'connection refused')
              else 'held: Retry-After from HTTP ' || sg.http_status end,
         now()
  from signals sg
  where (sg.overloads > 0 or sg.hold_until is not null)
    and not exists (select 1 from sluice.levels lv where lv.queue = sg.queue and lv.lane = sg.level)
  order by sg.queue, sg.level
  on conflict (queue, lane) do nothing
)`;

const SETTLE = prepared(
  'settle',
  `
with raw as (
  select s.* from jsonb_to_recordset($1::jsonb) as s(
    id bigint, lease_id uuid, require text, leased_at timestamptz, attempt integer, status text, outcome text,
    wait_ms double precision, attempts_delta integer, deferrals_delta integer, result text, error text,
    http_status integer, duration_ms integer, signal text)
),
-- A push's signal belongs to a level (0016_levels.sql): its key's lane, else its queue ('*').
-- An overload answer on an adaptive queue (whose limit is what it learnt, $2 the environment's
-- adaptive queues, an override wins) is not the task's fault: it waits without using an
-- attempt, as a Retry-After deferral does and within the same bound ($3), and its level learns.
input as (
  select r.id, r.lease_id, r.require, r.leased_at, r.attempt,
         case when a.defer then 'pending' else r.status end as status,
         case when a.defer then 'deferred' else r.outcome end as outcome,
         case when a.defer then 0 else r.wait_ms end as wait_ms,
         case when a.defer then -1 else r.attempts_delta end as attempts_delta,
         case when a.defer then 1 else r.deferrals_delta end as deferrals_delta,
         r.result,
         case when a.defer then 'deferred by an overload answer (' || coalesce(r.error, 'overload') || '): the queue is adaptive, its limit learns'
              else r.error end as error,
         r.http_status, r.duration_ms, r.signal, a.queue, a.level, coalesce(a.adaptive, false) as adaptive,
         -- An ending without a push's duration (a lease call, expiry) lasted from the lease's start until now.
         coalesce(r.duration_ms, (extract(epoch from now() - r.leased_at) * 1000)::integer) as took_ms
  from raw r
  left join lateral (
    select t.queue, case when t.lane = '' then '*' else t.lane end as level, ad.adaptive,
           r.signal = 'overload' and ad.adaptive and t.deferrals < $3::integer as defer
    from sluice.tasks t
    left join sluice.queues q on q.name = t.queue
    cross join lateral (select coalesce((q.options ->> 'adaptive')::boolean, t.queue = any($2::text[])) as adaptive) ad
    where r.signal is not null and t.id = r.id and t.lease_id = r.lease_id and t.status = 'leased'
  ) a on true
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
),${lowerHintsCte('settled')},
${LEVELS_LEARN}
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
export async function leaseSettleMany(
  db: Queryable,
  items: readonly LeaseSettlement[],
  adaptiveQueues: readonly string[] = [],
): Promise<Map<string, TaskStatus>> {
  if (items.length === 0) return new Map();
  // A retry's due time was decided on this process's clock; the database keeps due times on
  // its own. What travels is the wait, so a clock ahead of or behind the database's neither
  // stretches nor skips a backoff, a Retry-After or a release's delay.
  const clockMs = Date.now();
  const input = items.map(({ taskId, leaseId, leasedAt, attempt, settlement: s, durationMs, require, signal }) => ({
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
    signal: signal ?? null,
  }));
  const rows = await db.query<{ id: string; status: TaskStatus }>(SETTLE, [JSON.stringify(input), adaptiveQueues, LIMITS.maxDeferrals]);
  return new Map(rows.map((r) => [r.id, r.status]));
}
