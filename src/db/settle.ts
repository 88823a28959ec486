/**
 * Ending leases. Every write names the lease (compare-and-set on task id, lease id and the
 * leased status), so a writer whose lease is gone changes nothing. A lease that ends in a retry,
 * a deferral or a release leaves a row in `sluice.attempts`; one that finishes its task moves
 * the task into history with that attempt as its final one (db/history.ts).
 */
import { type EndpointHealth, type Settlement, type Signal, takenBack } from '../core/outcome.ts';
import { type LeasedTask, LIMITS, type TaskStatus } from '../core/types.ts';
import { prepared, type Queryable } from './db.ts';
import { archiveCtes } from './history.ts';
import { lowerHintsCte } from './lanes.ts';
import { levelOf } from './levels.ts';
import { stillLeased } from './rows.ts';

export interface LeaseSettlement {
  taskId: string;
  leaseId: string;
  /**
   * When the lease began, and the attempt it carried (the task's attempt count at the time).
   * `null` when the caller found the lease ended already (a lease call sent again): then only a
   * replay of this very ending can match, and it writes nothing.
   */
  leasedAt: Date | null;
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
  /**
   * What the push's answer says of the endpoint's capacity (core/outcome.ts `pushSignal`), with
   * the task's queue, concurrency key and deferrals so far; pushes only. `health`: what it says
   * of the task's origin (`endpointHealth`), for the origin of `url`, which `pauseAfter`
   * failures in a row pause (0: never).
   */
  signal?: {
    signal: Signal | null;
    queue: string;
    concurrencyKey: string | null;
    deferrals: number;
    url?: string | null;
    health?: EndpointHealth | null;
    pauseAfter?: number;
  } | null;
}

/**
 * A lease's end as `leaseSettleMany` takes it, for a task as it was leased: the attempt is the
 * task's attempt count at its claim (the attempts row it writes is keyed by it).
 */
export function leaseEnding(
  task: Pick<LeasedTask, 'id' | 'attempts' | 'lease'>,
  settlement: Settlement,
  durationMs: number | null,
): LeaseSettlement {
  return { taskId: task.id, leaseId: task.lease.id, leasedAt: task.lease.leasedAt, attempt: task.attempts, settlement, durationMs };
}

/**
 * The settle finds its tasks by id only, whatever the statistics said when its plan was made (it
 * is prepared once per connection, and its generic plan is made again whenever they change).
 * Made from statistics that said "no rows" (an autovacuum found every task finished), a join on
 * the id read the primary key whole, in order, for each of the statement's three lookups. So each
 * lookup also names its ids as an array (`t.id = any(…)`), which only a probe of the primary key
 * serves, and checks the status with `stillLeased` (test/db/claim-plans.test.ts).
 */
const STILL_LEASED = stillLeased('t');

/** As the caller asks: a lease not yet past its expiry, one past it, or either. */
const LEASE_STILL_MATCHES = `case s.require when 'unexpired' then t.lease_expires_at > now()
                                 when 'expired' then t.lease_expires_at <= now()
                                 else true end`;

const SETTLE = prepared(
  'settle',
  `
-- Each item is answered by its place n. A lease named twice (a push's answer and the reaper's
-- expiry of it, after an outage) is ended once, by the push's answer if it is there: two rows
-- for one lease would write its attempt twice, and fail every item with the duplicate key.
with raw as (
  select distinct on (s.id, s.lease_id) s.* from jsonb_to_recordset($1::jsonb) as s(
    n integer, id bigint, lease_id uuid, require text, leased_at timestamptz, attempt integer, status text, outcome text,
    wait_ms double precision, attempts_delta integer, deferrals_delta integer, result text, error text,
    http_status integer, duration_ms integer, signal text, queue text, level text, deferrals integer,
    url text, health text, pause_after integer)
  order by s.id, s.lease_id, s.require nulls first, s.n
),
-- A push's signal belongs to a level (0016_levels.sql): its key's lane, else its queue ('*'),
-- both given with it. An overload answer on an adaptive queue (whose limit is what it learnt,
-- $2 the environment's adaptive queues, an override wins) is not the task's fault: it waits
-- without using an attempt, as a Retry-After deferral does and within the same bound ($3), and
-- its level learns. Only the small sluice.queues is read for it, never the task again.
input as (
  select r.n, r.id, r.lease_id, r.require, r.leased_at, r.attempt,
         case when a.defer then 'pending' else r.status end as status,
         case when a.defer then 'deferred' else r.outcome end as outcome,
         case when a.defer then 0 else r.wait_ms end as wait_ms,
         case when a.defer then -1 else r.attempts_delta end as attempts_delta,
         case when a.defer then 1 else r.deferrals_delta end as deferrals_delta,
         r.result,
         case when a.defer then 'deferred by an overload answer (' || coalesce(r.error, 'overload') || '): the queue is adaptive, its limit learns'
              else r.error end as error,
         r.http_status, r.duration_ms, r.signal, r.queue, r.level, r.signal is not null and ad.adaptive as adaptive,
         r.url, r.health, r.pause_after,
         -- An ending without a push's duration (a lease call, expiry) lasted from the lease's start until now.
         coalesce(r.duration_ms, (extract(epoch from now() - r.leased_at) * 1000)::integer) as took_ms
  from raw r
  left join sluice.queues q on r.signal is not null and q.name = r.queue
  cross join lateral (select coalesce((q.options ->> 'adaptive')::boolean, r.queue = any($2::text[])) as adaptive) ad
  cross join lateral (select r.signal = 'overload' and ad.adaptive and r.deferrals < $3::integer as defer) a
),
-- Leases that end in a retry, a deferral or a release, locked while still held: what follows
-- reads each row as it is now, and a cancel asked for meanwhile turns the retry into the end.
-- A success or a death ends the task whatever: its delete below needs no lock first.
held as (
  select s.*, t.cancel_requested_at is not null as final
  from sluice.tasks t join input s on t.id = s.id and t.lease_id = s.lease_id
  where s.status = 'pending' and t.id = any(array(select id from input where status = 'pending'))
    and ${STILL_LEASED} and ${LEASE_STILL_MATCHES}
  for update of t
),
done as (
  delete from sluice.tasks t using input s left join held h on h.id = s.id
  where t.id = s.id and t.id = any(array(select id from input)) and t.lease_id = s.lease_id
    and ${STILL_LEASED} and ${LEASE_STILL_MATCHES}
    and (s.status <> 'pending' or h.final)
  returning t.*, case when s.status = 'pending' then 'cancelled' else s.status end as fin_status, s.result as fin_result,
            s.error as fin_error, s.http_status as fin_http_status,
            true as fin_attempt, s.took_ms as fin_duration_ms, s.n as fin_n
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
  where t.id = s.id and t.id = any(array(select id from held where not final)) and not s.final
  returning s.n, t.id, t.status, t.queue, t.lane, t.priority, t.run_at
),
history as (
  insert into sluice.attempts (task_id, attempt, lease_id, started_at, outcome, http_status, duration_ms, error)
  select s.id, s.attempt, s.lease_id, s.leased_at, s.outcome, s.http_status, s.took_ms, s.error
  from settled st join held s on s.id = st.id
  on conflict (task_id, lease_id) do nothing
),
-- An item whose lease was not held may have been ended by this very item, in a try whose answer
-- was lost (the retry of a commit that succeeded): its attempt is recorded as this one would
-- write it. Then the item is answered with what it did, marked as a replay; it writes nothing.
replayed as (
  select s.n, s.id, r.status
  from input s
  cross join lateral (
    select case when a.outcome in ('succeeded', 'dead', 'cancelled') then a.outcome else 'pending' end as status
    from sluice.all_attempts a
    where a.task_id = s.id and a.lease_id = s.lease_id
      and (a.outcome = s.outcome or (s.status = 'pending' and a.outcome = 'cancelled'))
      and a.error is not distinct from s.error and a.http_status is not distinct from s.http_status
    limit 1
  ) r
  where s.n <> all(array(select n from settled union all select fin_n from done))
),${lowerHintsCte('settled')},
-- What the answers teach their levels (migrations/functions/levels.sql), only when there is something to.
-- A Retry-After holds what sent it: its origin (endpoints, below) and its key's lane, never the
-- whole queue; only a signal with no URL (none is pushed without one) still holds the queue ('*').
learn as (
  select case when count(*) > 0 then sluice.levels_learn(
           jsonb_agg(jsonb_build_object('queue', i.queue, 'level', i.level, 'signal', i.signal, 'adaptive', i.adaptive,
                                        'leased_at', i.leased_at, 'wait_ms', i.wait_ms,
                                        'cause', coalesce('HTTP ' || i.http_status, 'connection refused'))),
           (select array_agg(id) from input)) end as levels
  from input i
  where i.queue is not null and ((i.adaptive and i.signal in ('overload', 'ok')) or (i.signal = 'hold' and (i.level <> '*' or i.url is null)))
),
-- What the pushes that ended here teach their origins (migrations/functions/endpoints.sql): how
-- many of them failed, a pause, a resume (which makes the tasks parked behind it due), a hold.
endpoints as (
  select case when count(*) > 0 then sluice.endpoints_learn(
           jsonb_agg(jsonb_build_object('n', i.n, 'id', i.id, 'origin', sluice.url_origin(i.url), 'health', i.health,
                                        'wait_ms', i.wait_ms, 'error', coalesce(i.error, 'HTTP ' || i.http_status)) order by i.n),
           max(i.pause_after)) else 0 end as released
  from input i
  where i.url is not null and i.n = any(array(select n from settled union all select fin_n from done))
    -- A failure or a hold always; a 2xx only where it ends something (a run of failures, a pause,
    -- a probe): one probe of the primary key, no lock and no write for a healthy origin.
    and (i.health in ('fail', 'hold')
         or (i.health = 'ok' and exists (select from sluice.endpoints e
                                         where e.origin = sluice.url_origin(i.url)
                                           and (e.consecutive_failures > 0 or e.paused_by is not null or e.probe_task is not null))))
),
-- Whether a claim pass could find work now, when $4 asks (else "yes", and nothing is read): the
-- hints as they were (sluice.work_waits), or a task this statement makes due at once, which that
-- snapshot cannot see: a retry due now (its hint is lowered above), a callback (enqueued by a
-- trigger once the statement ends).
waits as (
  select case when $4::boolean
              then sluice.work_waits()
                   or exists (select 1 from settled where run_at <= now())
                   or exists (select 1 from done where callback is not null)
                   or exists (select 1 from endpoints where released > 0)
              else true end as work_waits
)
select n, id::text as id, status, false as repeated, work_waits from settled cross join learn cross join endpoints cross join waits
union all
select fin_n, id::text, fin_status, false, work_waits from done cross join learn cross join endpoints cross join waits
union all
select n, id::text, status, true, work_waits from replayed cross join learn cross join waits`,
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
  /** The clock the settlements' due times were decided on, read now. */
  clockMs: number = Date.now(),
): Promise<Map<string, TaskStatus>> {
  return (await leaseSettleReport(db, items, adaptiveQueues, false, clockMs)).held;
}

export interface SettleReport {
  /** Each task whose lease was still held, with the status it has now (or had, for a replay). */
  held: Map<string, TaskStatus>;
  /**
   * Each item's own outcome, in order: the status it gave its task, `repeated` when an earlier
   * try of this very ending had written it (its answer was lost); `null` when its lease was not
   * held (it ended otherwise, or the item named a lease another item of the batch ended).
   */
  items: Array<{ status: TaskStatus; repeated: boolean } | null>;
  /**
   * Whether a claim pass could find work once these commit (`sluice.work_waits`): a slot freed
   * here can be wanted only then. `true` when not asked, or when no lease was held.
   */
  workWaits: boolean;
}

/**
 * `leaseSettleMany`, and, when `askWorkWaits`, whether work waits for a claim pass (the
 * dispatcher's settler asks only when it would act on the answer: the probe is per statement).
 */
export async function leaseSettleReport(
  db: Queryable,
  items: readonly LeaseSettlement[],
  adaptiveQueues: readonly string[],
  askWorkWaits: boolean,
  clockMs: number,
): Promise<SettleReport> {
  if (items.length === 0) return { held: new Map(), items: [], workWaits: true };
  // A retry's due time was decided on the caller's clock (`clockMs` is that clock now); the
  // database keeps due times on its own. What travels is the wait, so a clock ahead of or behind
  // the database's neither stretches nor skips a backoff, a Retry-After or a release's delay.
  // (It runs from when the database hears of it, the way there later than the outcome: late,
  // never early.)
  const input = items.map(({ taskId, leaseId, leasedAt, attempt, settlement: s, durationMs, require, signal }, n) => ({
    n,
    id: taskId,
    lease_id: leaseId,
    require: require ?? null,
    leased_at: leasedAt?.toISOString() ?? null,
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
    signal: signal?.signal ?? null,
    queue: signal?.queue ?? null,
    level: signal ? levelOf(signal.concurrencyKey) : null,
    deferrals: signal?.deferrals ?? null,
    url: signal?.url ?? null,
    health: signal?.health ?? null,
    pause_after: signal?.pauseAfter ?? null,
  }));
  const rows = await db.query<{ n: number; id: string; status: TaskStatus; repeated: boolean; work_waits: boolean }>(SETTLE, [
    JSON.stringify(input),
    adaptiveQueues,
    LIMITS.maxDeferrals,
    askWorkWaits,
  ]);
  const outcomes: SettleReport['items'] = items.map(() => null);
  for (const r of rows) outcomes[r.n] = { status: r.status, repeated: r.repeated };
  return { held: new Map(rows.map((r) => [r.id, r.status])), items: outcomes, workWaits: rows[0]?.work_waits ?? true };
}

/**
 * Ends leases before their work could begin (core/outcome.ts `takenBack`): each task pending
 * now, its attempt given back. The tasks whose lease was still current, with their status.
 */
export function leasesTakeBack(
  db: Queryable,
  tasks: readonly Pick<LeasedTask, 'id' | 'attempts' | 'lease'>[],
  error: string,
): Promise<Map<string, TaskStatus>> {
  const nowMs = Date.now();
  return leaseSettleMany(
    db,
    tasks.map((t) => leaseEnding(t, takenBack(error, nowMs), null)),
    [],
    nowMs,
  );
}
