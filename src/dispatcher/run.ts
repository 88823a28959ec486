/**
 * A dispatcher run: reap → claim → push → settle, looping until nothing is claimable or the
 * run's time budget is spent, and then reading when the next thing comes due (docs/DESIGN.md §6).
 * Pushes run in parallel up to the configured parallelism; a new claim pass starts when a
 * push frees a place, never in a busy loop. This file is the loop and its wiring; when it
 * claims, waits or stops is `nextStep` (pacing.ts), its watch on work coming due is `DueWatch`
 * (due-watch.ts), and what a push's outcome writes is `outcomeRecorder` (record.ts).
 */
import { adaptiveQueues, type Config, claimQueuesJson } from '../config.ts';
import { expiryOutcome } from '../core/lease.ts';
import { classifyPush, type PushResult, takenBack } from '../core/outcome.ts';
import type { LeasedTask } from '../core/types.ts';
import { taskClaimBatch } from '../db/claim.ts';
import type { Db } from '../db/db.ts';
import { nextDueInMs } from '../db/due.ts';
import { reapOverdue } from '../db/reap.ts';
import { leaseEnding } from '../db/settle.ts';
import { type PushDeps, pushTask } from '../push/push.ts';
import { fetchTransport, type PushTransport } from '../push/transport.ts';
import type { Keyring } from '../security/keyring.ts';
import { DueWatch } from './due-watch.ts';
import { fireDueSchedules } from './fire-schedules.ts';
import { Meter } from './meter.ts';
import { nextTurn } from './next-turn.ts';
import { ClaimAhead, nextStep } from './pacing.ts';
import { outcomeRecorder } from './record.ts';
import { emptyReport, type RunReport } from './report.ts';
import { withDbRetry } from './retry-db.ts';
import { Settler } from './settler.ts';
import { systemTimers, type Timers } from './timers.ts';

/** The event type a run listens for on `RunOptions.nudges`. */
export const DUE_EVENT = 'due';

export interface DispatchDeps {
  db: Db;
  config: Config;
  keyring: Keyring;
  /** The clock and timers of every reading of the time in the run (dispatcher/timers.ts). */
  timers?: Timers;
  random?: () => number;
  /** How a push is sent; default `fetch` (push/transport.ts). */
  transport?: PushTransport;
  log?: Pick<Console, 'info' | 'warn' | 'error'>;
  /**
   * Delivers one leased task; default the signed HTTP push. Benchmarks of the engine alone pass a
   * no-op. `waitedMs`: how long the task waited for a place since its claim (its lease ran meanwhile).
   */
  push?: (task: LeasedTask, waitedMs: number) => Promise<PushResult>;
  /** Told of every push that ended, and when it began (the Node server's spans: src/node/otel.ts). */
  pushed?: (task: LeasedTask, result: PushResult, startedAtMs: number) => void;
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
  /**
   * Instead of ending when nothing is claimable, wait this long for a nudge or a due time, with
   * what the run has open (its connections, its measurements): work that comes meanwhile is
   * claimed at once, and a retry or a delayed task due within it is claimed as it comes due,
   * timed by the round trip to arrive then. Default 0: end at once.
   */
  lingerMs?: number;
  /**
   * Called when a claim pass fills every place: there may be more work than this run can push.
   * Again at most every `BUSY_REPEAT_MS` while passes keep filling them: a shard it woke may have
   * found nothing then (an adaptive limit learnt since) and gone back to sleep.
   */
  onBusy?: () => void;
}

/** A read of the next due time: `inMs` counted where it ran, answered at `atMs` (the run's clock). */
type DueRead = { inMs: number | null; atMs: number };

/** Task priority, then due time, then id: the order within a key, applied to one claim's tasks. */
function bestFirst(a: LeasedTask, b: LeasedTask): number {
  return a.priority - b.priority || a.runAt.getTime() - b.runAt.getTime() || Number(BigInt(a.id) - BigInt(b.id));
}

/** What executing a statement adds to a round trip, taken off half of one to estimate the way there. */
const ONE_WAY_MARGIN_MS = 2;

/** How often a run that keeps filling every place says so again (`onBusy`). */
export const BUSY_REPEAT_MS = 1_000;

export async function dispatchRun(deps: DispatchDeps, options: RunOptions): Promise<RunReport> {
  const timers = deps.timers ?? systemTimers;
  const now = () => timers.now();
  const log = deps.log ?? console;
  const { config, db } = deps;
  const report = emptyReport();
  /** The shortest round trip to the database seen: a claim's or a read's, from call to answer. */
  let rttMs = Number.POSITIVE_INFINITY;
  /**
   * The way to the database, one direction: half that round trip, less what executing a
   * statement takes (a couple of ms), so that it errs short: a claim timed by it rarely arrives
   * before its task is due (and one that does is sent again: `linger`).
   */
  const oneWayMs = () => (Number.isFinite(rttMs) ? Math.max(0, rttMs / 2 - ONE_WAY_MARGIN_MS) : 0);
  const meter = deps.meter ?? new Meter();
  meter.add('dispatch_runs');
  const adaptive = adaptiveQueues(config);
  // A settle finds out whether work waits only when the run would act on it (below: after a
  // pass that found less than it asked for); in a drain, passes are full and it reads nothing.
  const settler = new Settler(db, adaptive, () => !lastPassFull);
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
  const push = deps.push ?? ((task: LeasedTask, waitedMs: number) => pushTask(task, pushDeps, waitedMs));
  const settle = outcomeRecorder({ db, settler, meter, report, log, now, random: deps.random ?? Math.random, adaptiveQueues: adaptive });

  const deadline = now() + options.budgetMs;
  const inFlight = new Set<Promise<void>>();
  /** Tasks claimed ahead of a free place (pacing.ts `ClaimAhead`), with when their claim answered. */
  const ready: Array<{ task: LeasedTask; claimedAt: number }> = [];
  const ahead = new ClaimAhead(config.dispatchParallelism, config.maxClaimBatch);
  const settling = new Set<Promise<void>>();
  /** Reaps and schedule firings that came due while the run waited on pushes. */
  const background = new Set<Promise<void>>();
  let freed = true; // a place was freed (or nothing was tried yet) since the last claim pass
  let lastPassFull = true;
  let busySince: number | null = null;
  let idle = false; // ended because nothing was claimable and nothing was in flight
  let reaped = false;
  let dueWork = false;
  /** Ends the run's current wait: a push ended, work came due, a nudge, an abort. */
  let wakeUp: () => void = () => {};
  const free = () => {
    freed = true;
    wakeUp();
  };

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
  const reaping = reapThenFire().finally(() => {
    reaped = true;
    wakeUp();
  });
  if (options.reapOnly) {
    await reaping;
    await settler.flush();
    report.roundTrips += settler.writes;
    await meter.write(db, { now: now(), minIntervalMs: deps.meterIntervalMs ?? 0 });
    return report;
  }

  // While pushes are in flight the run waits for one to end; work that comes due meanwhile
  // wakes it through the watch, and then it reaps, fires and claims as at its start.
  const watch = new DueWatch({
    timers,
    probe: () => withDbRetry(() => nextDueInMs(db)),
    onDue: () => {
      dueWork = true;
      free();
    },
    onReadEnd: () => wakeUp(),
    waiting: () => inFlight.size > 0,
    log,
  });

  /** Claims up to `max` tasks: they take free places at once, and wait for one beyond them. */
  const claim = async (max: number): Promise<number> => {
    report.claimPasses++;
    report.roundTrips++;
    // Cleared before the claim: a push that ends (or a nudge) while it runs sets it again.
    freed = false;
    const sentAt = now();
    // A claim whose reply was lost may have committed: retry only what surely did not run.
    const batch = await withDbRetry(() => taskClaimBatch(db, { max, clusterCap: config.clusterCap, queuesJson }), { idempotent: false });
    const claimedAt = now();
    report.lastClaimAtMs = sentAt;
    ahead.claimTook(claimedAt - sentAt);
    rttMs = Math.min(rttMs, claimedAt - sentAt);
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
    lastPassFull = batch.length === max;
    if (
      lastPassFull &&
      (busySince === null || now() - busySince >= BUSY_REPEAT_MS) &&
      inFlight.size + ready.length + batch.length >= config.dispatchParallelism
    ) {
      busySince = now();
      options.onBusy?.();
    }
    // Best first, as the claim chose them (its rows come back in no order): a place frees for
    // one task at a time when the run is busy.
    for (const task of [...batch].sort(bestFirst)) ready.push({ task, claimedAt });
    fillPlaces();
    return batch.length;
  };

  /** Starts the tasks that wait, while places are free (not once the run is told to stop). */
  const fillPlaces = () => {
    while (ready.length > 0 && inFlight.size < config.dispatchParallelism && !stopped()) {
      const next = ready.shift() as (typeof ready)[number];
      startPush(next.task, now() - next.claimedAt);
    }
  };

  const startPush = (task: LeasedTask, waitedMs: number) => {
    // The place frees when the push ends, and a task claimed ahead takes it at once; the
    // settle is written meanwhile (group commit), so the next claim pass need not wait for it.
    // Until it commits, the lease still counts against every limit (a pass may take less,
    // never more), so its commit frees the slot again, as a push's end frees a place. A place
    // is worth a pass only after a pass that filled every place it asked for: after one that
    // found less, what held the rest back was not the places, and only a slot's release (the
    // settle's commit), a poke or a due time can change that; and a slot's release only while
    // work waits for a pass (the settle says so: db/settle.ts). An idle dispatcher made three
    // passes a task, the last two always in vain; now one.
    const startedAt = now();
    const work: Promise<void> = push(task, waitedMs)
      .then((result: PushResult) => {
        ahead.pushTook(result.durationMs);
        // What observes a push never costs its settle.
        try {
          deps.pushed?.(task, result, startedAt);
        } catch (error) {
          log.error('sluice: recording a push (spans) failed', error);
        }
        const written = settle(task, classifyPush(result, now()), result.durationMs).finally(() => {
          settling.delete(written);
          if (lastPassFull || settler.workWaits) free();
          else wakeUp();
        });
        settling.add(written);
      })
      .catch((error: unknown) => log.error(`sluice: pushing task ${task.id} failed; its lease will expire`, error))
      .finally(() => {
        inFlight.delete(work);
        fillPlaces();
        if (lastPassFull) free();
        else wakeUp();
      });
    inFlight.add(work);
  };

  /** The last read of the next due time: `inMs` from `atMs` (this clock, when the answer came). */
  let due: DueRead | null = null;

  /** Reads when the next thing comes due. */
  const readDue = async (): Promise<DueRead> => {
    report.roundTrips++;
    const sentAt = now();
    const inMs = await withDbRetry(() => nextDueInMs(db));
    const atMs = now();
    rttMs = Math.min(rttMs, atMs - sentAt);
    return { inMs, atMs };
  };
  /** Which linger is the latest: a read made for an earlier one is not this one's answer. */
  let lingers = 0;
  /** The run's progress when a due time last ended a linger, and how many times in a row it brought none. */
  let dueActedAt = -1;
  let dueInVain = 0;
  const progress = () => report.claimed + report.reaped + report.fired;

  /**
   * The run has nothing to claim: it waits `options.lingerMs` for work before it ends. Its tail
   * goes on meanwhile: the settles of its last pushes are written (a retry's due time with
   * them), then the next due time is read. A nudge or a settle that frees waiting work ends the
   * wait (claim now); so does the next due time, less a round trip, so that the claim reaches
   * Postgres as the task comes due. Returns whether to claim again.
   */
  const linger = async (): Promise<boolean> => {
    const until = Math.min(now() + (options.lingerMs ?? 0), deadline);
    const mine = ++lingers;
    // Work that reads due and yields nothing when acted on twice in a row (a stall: core/wake.ts)
    // is left to the caller's backoff rather than read and claimed again and again here. Once
    // is no stall: a claim timed by a round trip that was long for once can arrive too early.
    if (dueActedAt >= 0) dueInVain = dueActedAt === progress() ? dueInVain + 1 : 0;
    dueActedAt = -1;
    const stalled = dueInVain >= 2;
    due = null;
    let reading = true;
    const read: Promise<void> = (async () => {
      await Promise.allSettled(settling);
      await settler.flush();
      const answer = await readDue();
      if (mine === lingers) due = answer;
    })()
      .catch((error: unknown) => log.warn('sluice: reading the next due time failed', error))
      .finally(() => {
        reading = false;
        background.delete(read);
        wakeUp();
      });
    background.add(read);
    for (;;) {
      if (stopped()) return false;
      if (freed) return true;
      const known = due as DueRead | null;
      // `inMs` was counted where the read ran, a way back before its answer came (`atMs`); the
      // claim takes a way there: sent a round trip before, it arrives as the task comes due.
      const claimAt = known?.inMs == null || stalled ? Number.POSITIVE_INFINITY : known.atMs + known.inMs - 2 * oneWayMs();
      if (claimAt <= now()) {
        // Due now: reaped, fired and claimed as at the run's start.
        dueActedAt = progress();
        dueWork = true;
        freed = true;
        return true;
      }
      if (!reading && now() >= until) return false;
      const wait = Math.max(0, Math.min(until, claimAt) - now());
      await new Promise<void>((resolve) => {
        const timer = reading ? null : timers.setTimeout(resolve, wait);
        wakeUp = () => {
          if (timer !== null) timers.clearTimeout(timer);
          resolve();
        };
      });
    }
  };

  /** Tasks claimed and never pushed: their leases end unused, no attempt spent. */
  const giveBack = (tasks: readonly LeasedTask[]) =>
    Promise.all(
      tasks.map((task) =>
        settler
          .settle(leaseEnding(task, takenBack('the dispatcher stopped before pushing it', now()), null))
          .catch((error: unknown) => log.error(`sluice: giving back task ${task.id} failed; its lease will expire`, error)),
      ),
    );

  const stopped = () => options.signal?.aborted === true;
  const aborted = () => wakeUp();
  options.signal?.addEventListener('abort', aborted, { once: true });
  options.nudges?.addEventListener(DUE_EVENT, free);

  /** The counters' write, sent as the run ends: beside its last read, unless the run failed. */
  let metering: Promise<void> | null = null;
  let failed = true;
  try {
    const maxPushes = options.maxPushes ?? Number.POSITIVE_INFINITY;
    while (now() < deadline && report.claimed < maxPushes && !stopped()) {
      if (dueWork && reaped) {
        dueWork = false;
        const again = reapThenFire().finally(() => {
          background.delete(again);
          free();
        });
        background.add(again);
      }
      const step = nextStep({
        parallelism: config.dispatchParallelism,
        maxClaimBatch: config.maxClaimBatch,
        maxPushes,
        claimed: report.claimed,
        inFlight: inFlight.size,
        ready: ready.length,
        ahead: ahead.ahead,
        perClaim: ahead.perClaim,
        settling: settling.size,
        background: background.size + (watch.reading ? 1 : 0),
        freed,
        lastPassFull,
        reaped,
      });
      if (step.kind === 'claim') {
        await claim(step.max);
        continue;
      }
      if (step.kind === 'idle') {
        if ((options.lingerMs ?? 0) > 0 && (await linger())) continue;
        idle = true;
        break;
      }
      if (inFlight.size > 0) watch.arm();
      await new Promise<void>((resolve) => {
        wakeUp = resolve;
      });
      // Pushes answered in the same turn free their places together: one pass for them all.
      if (inFlight.size > 0) await nextTurn();
    }
    failed = false;
  } finally {
    options.nudges?.removeEventListener(DUE_EVENT, free);
    options.signal?.removeEventListener('abort', aborted);
    watch.stop();
    // Whatever ends the run (a database error included), pushes already made are settled, and
    // tasks claimed ahead are pushed (their places free as pushes end), or, once the run is told
    // to stop, given back unused.
    while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
    if (ready.length > 0) await giveBack(ready.splice(0).map((r) => r.task));
    await Promise.all([reaping, Promise.allSettled(background), watch.settled()]);
    await Promise.allSettled(settling);
    await settler.flush();
    metering = meter.write(db, { now: now(), minIntervalMs: deps.meterIntervalMs ?? 0 });
    if (failed) await metering;
  }
  report.roundTrips += settler.writes + watch.reads;
  // Stopped by its budget, not for want of work: whatever is left is due now.
  report.more = !idle && !stopped();
  // The counters, beside the last read of the next due time (a lingering run's is fresh: it
  // ended with nothing written since).
  const lingered = due as DueRead | null;
  await Promise.all([
    metering,
    idle && !stopped() && lingered === null
      ? readDue().then((answer) => {
          due = answer;
        })
      : null,
  ]);
  if (idle && !stopped()) {
    const last = due as DueRead | null;
    report.nextDueInMs = last?.inMs == null ? null : Math.max(0, Math.ceil(last.inMs - (now() - last.atMs)));
  }
  return report;
}
