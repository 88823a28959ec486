/**
 * A dispatcher run: reap → claim → push → settle, looping until nothing is claimable or the
 * run's time budget is spent, and then reading when the next thing comes due (docs/DESIGN.md §6).
 * Pushes run in parallel up to the configured parallelism; a new claim pass starts when a
 * push frees a place, never in a busy loop.
 */
import { type Config, claimQueuesJson } from '../config.ts';
import { expiryOutcome, unansweredNote } from '../core/lease.ts';
import { classifyPush, decide, type Outcome, type PushResult } from '../core/outcome.ts';
import type { LeasedTask } from '../core/types.ts';
import { taskClaimBatch } from '../db/claim.ts';
import type { Db } from '../db/db.ts';
import { nextDueInMs } from '../db/due.ts';
import { leaseNote } from '../db/leases.ts';
import { reapOverdue } from '../db/reap.ts';
import type { Keyring } from '../security/keyring.ts';
import { fireDueSchedules } from './fire-schedules.ts';
import { Meter } from './meter.ts';
import { nextTurn } from './next-turn.ts';
import { type PushDeps, pushTask } from './push.ts';
import { withDbRetry } from './retry-db.ts';
import { Settler } from './settler.ts';
import { fetchTransport, type PushTransport } from './transport.ts';

/** The shortest gap between two reads of the next due time within a run. */
const PROBE_GAP_MS = 250;

/** The event type a run listens for on `RunOptions.nudges`. */
export const DUE_EVENT = 'due';

export interface DispatchDeps {
  db: Db;
  config: Config;
  keyring: Keyring;
  now?: () => number;
  random?: () => number;
  /** How a push is sent; default `fetch` (dispatcher/transport.ts). */
  transport?: PushTransport;
  log?: Pick<Console, 'info' | 'warn' | 'error'>;
  /** Delivers one leased task; default the signed HTTP push. Benchmarks of the engine alone pass a no-op. */
  push?: (task: LeasedTask) => Promise<PushResult>;
  /**
   * Counts for /metrics, kept across runs by a long-lived process, which writes them at most
   * once per `meterIntervalMs` at a run's end (and on a timer of its own). Default: the run
   * counts on its own and writes at its end.
   */
  meter?: Meter;
  meterIntervalMs?: number;
}

export interface RunOptions {
  /** Stop claiming after this long; pushes already started are awaited. */
  budgetMs: number;
  /** Stop claiming once this many pushes were started. Default: no limit. */
  maxPushes?: number;
  /** Largest number of expired leases settled by this run's reap step. */
  reapLimit?: number;
  /** Only reap: claim nothing (the Worker's cron). */
  reapOnly?: boolean;
  /** Once aborted, the run claims nothing more; pushes already started are settled. */
  signal?: AbortSignal;
  /** A `due` event on it says more work came due while the run waits on its pushes: claim again now. */
  nudges?: EventTarget;
  /** Called once, the first time a claim pass fills every place: there may be more work than this run can push. */
  onBusy?: () => void;
}

export interface RunReport {
  claimPasses: number;
  claimed: number;
  succeeded: number;
  retried: number;
  deferred: number;
  dead: number;
  /** Expired leases settled as timed-out attempts. */
  reaped: number;
  /** Settlements whose lease was gone by the time they were written. */
  lost: number;
  /** Pushes answered with `Sluice-Ack: lease`: the endpoint holds the lease. */
  leaseKept: number;
  /** Pushes that timed out or lost their connection: their leases are held until they expire. */
  unanswered: number;
  /** Tasks enqueued by schedules that came due (docs/guide.md "Schedules"). */
  fired: number;
  /** Database round trips: reap, claim passes, settle writes and the next-due probe. */
  roundTrips: number;
  /** The run stopped for its budget (time, pushes) rather than for want of work: run again at once. */
  more: boolean;
  /** When the run ended with nothing claimable: ms until the next task or lease comes due; `null` = nothing waits on time. */
  nextDueInMs: number | null;
}

/** A report of a run that has done nothing yet. */
export function emptyReport(): RunReport {
  return {
    claimPasses: 0,
    claimed: 0,
    succeeded: 0,
    retried: 0,
    deferred: 0,
    dead: 0,
    reaped: 0,
    lost: 0,
    leaseKept: 0,
    unanswered: 0,
    fired: 0,
    roundTrips: 0,
    more: false,
    nextDueInMs: null,
  };
}

export async function dispatchRun(deps: DispatchDeps, options: RunOptions): Promise<RunReport> {
  const now = deps.now ?? Date.now;
  const random = deps.random ?? Math.random;
  const log = deps.log ?? console;
  const { config, db } = deps;
  const report = emptyReport();
  const meter = deps.meter ?? new Meter();
  meter.add('dispatch_runs');
  const settler = new Settler(db);
  const queuesJson = claimQueuesJson(config);
  const pushDeps: PushDeps = {
    keyring: deps.keyring,
    issuer: config.issuer,
    webhookSecret: config.webhookSecret,
    webhookSecretNext: config.webhookSecretNext,
    allowPrivateTargets: config.allowPrivateTargets,
    maxLeaseMs: config.maxLeaseMs,
    now,
    transport: deps.transport ?? fetchTransport((input, init) => fetch(input, init)),
  };
  const push = deps.push ?? ((task: LeasedTask) => pushTask(task, pushDeps));

  /** Records an outcome; never throws (a lease that cannot be settled expires and is reaped). */
  const settle = async (task: LeasedTask, outcome: Outcome, durationMs: number | null, require?: 'expired'): Promise<void> => {
    if (durationMs !== null) meter.observe('push_duration', task.queue, durationMs / 1000);
    if (outcome.type === 'lease_kept') {
      // The endpoint holds the lease now; it ends it with a lease call, or it expires.
      report.leaseKept++;
      meter.add('pushes', task.queue, 'lease_kept');
      return;
    }
    if (outcome.type === 'unanswered') {
      // The handler may still be running: its slot stays taken until the lease expires (then
      // the reaper counts a timed-out attempt) or the handler ends the lease with its token.
      // What happened is noted now, so that it can be seen meanwhile and kept at expiry.
      report.unanswered++;
      meter.add('pushes', task.queue, 'unanswered');
      // Said once per push: its key and queue may wait on this slot until then.
      log.warn(
        `sluice: the push of task ${task.id} (queue ${task.queue}${task.concurrencyKey === null ? '' : `, key ${task.concurrencyKey}`}) went unanswered (${outcome.error}); its slot is held until its lease expires at ${task.lease.expiresAt.toISOString()}`,
      );
      report.roundTrips++;
      await withDbRetry(() => leaseNote(db, task.id, task.lease.id, unansweredNote(task.attempts, outcome.error))).catch((error: unknown) =>
        log.warn(`sluice: noting the unanswered push of task ${task.id} failed`, error),
      );
      return;
    }
    const settlement = decide(task, outcome, now(), random());
    let held: boolean;
    try {
      held = await settler.settle({
        taskId: task.id,
        leaseId: task.lease.id,
        leasedAt: task.lease.leasedAt,
        attempt: task.attempts,
        settlement,
        durationMs,
        ...(require ? { require } : {}),
      });
    } catch (error) {
      log.error(`sluice: settling task ${task.id} failed; its lease will expire and be reaped`, error);
      return;
    }
    const ended: 'lost' | 'succeeded' | 'dead' | 'deferred' | 'retried' = !held
      ? 'lost'
      : settlement.status === 'succeeded'
        ? 'succeeded'
        : settlement.status === 'dead'
          ? 'dead'
          : outcome.type === 'deferred'
            ? 'deferred'
            : 'retried';
    report[ended]++;
    // An expired lease was no push: the reaper counts it as an expiry.
    if (require !== 'expired') meter.add('pushes', task.queue, ended);
  };

  const deadline = now() + options.budgetMs;
  const inFlight = new Set<Promise<void>>();
  const settling = new Set<Promise<void>>();
  let freed = true; // a place was freed (or nothing was tried yet) since the last claim pass
  let lastPassFull = true;
  let busy = false;
  let idle = false; // ended because nothing was claimable and nothing was in flight
  let onFreed: () => void = () => {};

  /** Fires the schedules that came due; never throws (a schedule left due fires in the next run). */
  const fire = async (): Promise<void> => {
    try {
      const fired = await fireDueSchedules(db, { log });
      report.roundTrips += fired.statements;
      report.fired += fired.fired;
      if (fired.fired > 0) freed = true;
    } catch (error) {
      log.error('sluice: firing due schedules failed', error);
    }
  };

  // Reap: expired leases are attempts that timed out. On its own connection, beside the first
  // claim pass (which counts no expired lease as a slot), so it adds nothing to a push's
  // latency; a task it makes pending again is claimed once it ends, as if a place was freed.
  const reapThenFire = () => {
    report.roundTrips++;
    return (
      withDbRetry(() => reapOverdue(db, options.reapLimit ?? 100))
        .then((expired) =>
          Promise.all(
            expired.map((task) => {
              report.reaped++;
              meter.add('lease_expiries', task.queue);
              // Only while still expired: a heartbeat that landed since the read wins.
              return settle(task, expiryOutcome(task, task.lease.expiresAt), null, 'expired');
            }),
          ),
        )
        .then(
          (settled) => {
            if (settled.length > 0) freed = true;
          },
          // Its leases stay expired, and the next run reaps them.
          (error: unknown) => log.error('sluice: reaping expired leases failed', error),
        )
        // Then schedules that came due fire: their tasks are claimed as if a place was freed.
        .then(() => (options.reapOnly ? undefined : fire()))
    );
  };
  let reaped = false;
  const reaping = reapThenFire().finally(() => {
    reaped = true;
    onFreed();
  });
  if (options.reapOnly) {
    await reaping;
    await settler.flush();
    report.roundTrips += settler.writes;
    await meter.write(db, { now: now(), minIntervalMs: deps.meterIntervalMs ?? 0 });
    return report;
  }

  // While pushes are in flight the run waits for one to end, but other work may come due
  // meanwhile: a retry or a delayed task, a rate limit's room, a schedule's slot, a lease's
  // expiry. Whenever it waits with pushes in flight, the run knows when the next thing comes due
  // (read at most every PROBE_GAP_MS) and wakes then: expired leases are reaped, due schedules
  // fire, and a claim pass runs, as at a run's start.
  const background = new Set<Promise<void>>();
  let finished = false;
  let dueTimer: ReturnType<typeof setTimeout> | null = null;
  let gapTimer: ReturnType<typeof setTimeout> | null = null;
  let probing = false;
  let dueWork = false;
  let lastProbe = Number.NEGATIVE_INFINITY;
  const watchDue = () => {
    if (finished || probing || dueTimer || gapTimer) return;
    const wait = lastProbe + PROBE_GAP_MS - Date.now();
    if (wait > 0) {
      gapTimer = setTimeout(() => {
        gapTimer = null;
        if (inFlight.size > 0) watchDue();
      }, wait);
      return;
    }
    probing = true;
    lastProbe = Date.now();
    report.roundTrips++;
    const probe = withDbRetry(() => nextDueInMs(db))
      .then((ms) => {
        if (ms === null || finished) return;
        dueTimer = setTimeout(() => {
          dueTimer = null;
          dueWork = true;
          freed = true;
          onFreed();
        }, ms);
      })
      .catch((error: unknown) => log.warn('sluice: reading the next due time failed', error))
      .finally(() => {
        probing = false;
        background.delete(probe);
      });
    background.add(probe);
  };

  const stopped = () => options.signal?.aborted === true;
  const aborted = () => onFreed();
  options.signal?.addEventListener('abort', aborted, { once: true });
  const nudged = () => {
    freed = true;
    onFreed();
  };
  options.nudges?.addEventListener(DUE_EVENT, nudged);

  try {
    const maxPushes = options.maxPushes ?? Number.POSITIVE_INFINITY;
    // While pushes are in flight, a pass waits until a quarter of the places are free: a few
    // passes of many tasks each, rather than one pass per push that ends. (Nothing is claimed
    // ahead of a free place: a lease is a slot, and one waiting here would hold it idle.)
    const passSize = Math.max(1, Math.floor(config.dispatchParallelism / 4));
    while (now() < deadline && report.claimed < maxPushes && !stopped()) {
      if (dueWork && reaped) {
        dueWork = false;
        const again = reapThenFire().finally(() => {
          background.delete(again);
          freed = true;
          onFreed();
        });
        background.add(again);
      }
      const room = Math.min(config.dispatchParallelism - inFlight.size, maxPushes - report.claimed);
      const enough = inFlight.size === 0 || room >= Math.min(passSize, maxPushes - report.claimed);
      if (room > 0 && enough && (freed || lastPassFull)) {
        const want = Math.min(room, config.maxClaimBatch);
        report.claimPasses++;
        report.roundTrips++;
        // Cleared before the claim: a push that ends (or a nudge) while it runs sets it again.
        freed = false;
        // A claim whose reply was lost may have committed: retry only what surely did not run.
        const batch = await withDbRetry(() => taskClaimBatch(db, { max: want, clusterCap: config.clusterCap, queuesJson }), {
          idempotent: false,
        });
        report.claimed += batch.length;
        meter.add('claim_passes');
        for (const task of batch) {
          meter.add('acquired', task.queue);
          // A first push only (a resume after a wait for children keeps its old due time), on the
          // database's clock at both ends: its claim, which the push follows at once.
          if (task.attempts === 1 && task.resumes === 0) {
            meter.observe('due_to_push', task.queue, (task.lease.leasedAt.getTime() - task.runAt.getTime()) / 1000);
          }
        }
        lastPassFull = batch.length === want;
        if (lastPassFull && !busy && inFlight.size + batch.length >= config.dispatchParallelism) {
          busy = true;
          options.onBusy?.();
        }
        for (const task of batch) {
          // The place frees when the push ends; its settle is written meanwhile (group commit),
          // so the next claim pass need not wait for it. Until it commits, the lease still
          // counts against every limit (a pass may take less, never more), so its commit frees
          // the slot again, as a push's end frees a place.
          const work: Promise<void> = push(task)
            .then((result: PushResult) => {
              const written = settle(task, classifyPush(result, now()), result.durationMs).finally(() => {
                settling.delete(written);
                freed = true;
                onFreed();
              });
              settling.add(written);
            })
            .catch((error: unknown) => log.error(`sluice: pushing task ${task.id} failed; its lease will expire`, error))
            .finally(() => {
              inFlight.delete(work);
              freed = true;
              onFreed();
            });
          inFlight.add(work);
        }
        if (batch.length > 0) continue;
      }
      // Nothing in flight or being settled, and nothing freed since the last claim pass began:
      // nothing to do.
      if (inFlight.size === 0 && settling.size === 0 && !freed && reaped && background.size === 0) {
        idle = true;
        break;
      }
      // Wait for a push to end (or a nudge), unless one already did while the claim pass
      // ran; with too few places free, even a nudge waits for a push to end.
      if (!enough || room <= 0 || !freed) {
        if (inFlight.size > 0) watchDue();
        await new Promise<void>((resolve) => {
          onFreed = resolve;
        });
        // Pushes answered in the same turn free their places together: one pass for them all.
        if (inFlight.size > 0) await nextTurn();
      }
    }
  } finally {
    options.nudges?.removeEventListener(DUE_EVENT, nudged);
    options.signal?.removeEventListener('abort', aborted);
    finished = true;
    if (dueTimer) clearTimeout(dueTimer);
    if (gapTimer) clearTimeout(gapTimer);
    // Whatever ends the run (a database error included), pushes already made are settled.
    await Promise.all([reaping, Promise.allSettled(inFlight), Promise.allSettled(background)]);
    await Promise.allSettled(settling);
    await settler.flush();
    await meter.write(db, { now: now(), minIntervalMs: deps.meterIntervalMs ?? 0 });
  }
  report.roundTrips += settler.writes;
  if (stopped()) return report;
  // Stopped by its budget, not for want of work: whatever is left is due now.
  report.more = !idle;
  if (idle) {
    report.roundTrips++;
    report.nextDueInMs = await withDbRetry(() => nextDueInMs(db));
  }
  return report;
}
