/**
 * A dispatcher run: reap → claim → push → settle, looping until nothing is claimable or the
 * run's time budget is spent, and then reading when the next thing comes due (docs/DESIGN.md §6).
 * Pushes run in parallel up to the configured parallelism; a new claim pass starts when a
 * push frees a place, never in a busy loop. This file is the run (`DispatchRun`: its state, one
 * method per step, and `drain`, the loop) and the cron's `reapExpired`; when it claims, waits or
 * stops, and whether a freed place is worth a pass, is pacing.ts; its watch on work coming due
 * is `DueWatch` (due-watch.ts), and what a push's outcome writes is `outcomeRecorder` (record.ts).
 */
import type { Config } from '../config.ts';
import { expiryOutcome } from '../core/lease.ts';
import { taskClaimBatch } from '../db/claim.ts';
import type { Db } from '../db/db.ts';
import { nextDueInMs } from '../db/due.ts';
import { loggable } from '../db/faults.ts';
import { reapOverdue } from '../db/reap.ts';
import { type PushDeps, pushTask } from '../push/push.ts';
import { fetchTransport } from '../push/transport.ts';
import { DueReads } from './due-reads.ts';
import { DueWatch } from './due-watch.ts';
import { fireDueSchedules } from './fire-schedules.ts';
import { Meter } from './meter.ts';
import { nextTurn } from './next-turn.ts';
import { ClaimAhead, freedPlaceWorthAPass, nextStep } from './pacing.ts';
import { Places } from './places.ts';
import { outcomeRecorder } from './record.ts';
import { emptyReport, type RunReport } from './report.ts';
import { type RetryOptions, withDbRetry } from './retry-db.ts';
import type { DispatchDeps, RunOptions } from './run-options.ts';
import { DUE_EVENT } from './run-options.ts';
import { Settler } from './settler.ts';
import { systemTimers, type Timers } from './timers.ts';

/** How often a run that keeps filling every place says so again (`onBusy`). */
export const BUSY_REPEAT_MS = 1_000;

/** Drains due work (docs/DESIGN.md §6): one run of the dispatcher, as the Worker's shards and the Node loop make it. */
export function dispatchRun(deps: DispatchDeps, options: RunOptions): Promise<RunReport> {
  return new DispatchRun(deps, options).drain();
}

/** Only reaps expired leases, claiming nothing (the Worker's cron, the safety net). */
export function reapExpired(deps: DispatchDeps, options: { reapLimit?: number } = {}): Promise<RunReport> {
  return new DispatchRun(deps, { budgetMs: 0, ...options }).reapExpired();
}

class DispatchRun {
  readonly report = emptyReport();
  readonly #deps: DispatchDeps;
  readonly #options: RunOptions;
  readonly #config: Config;
  readonly #db: Db;
  readonly #timers: Timers;
  readonly #log: Pick<Console, 'info' | 'warn' | 'error'>;
  readonly #meter: Meter;
  readonly #settler: Settler;
  readonly #queuesJson: string;
  readonly #record: ReturnType<typeof outcomeRecorder>;
  readonly #ahead: ClaimAhead;
  readonly #deadline: number;
  /** A database call retried through a passing fault waits on the run's timers. */
  readonly #retry: RetryOptions & { timers: Timers };
  /** The round trip to the database and the next due time, as this run has read them. */
  readonly #dueReads: DueReads;

  /** Pushes in flight, tasks claimed ahead waiting for a place, settles being written. */
  readonly #places: Places;
  /** Reaps, schedule firings and due-time reads that came due while the run waited on pushes. */
  readonly #background = new Set<Promise<void>>();

  /** A place was freed (or nothing was tried yet) since the last claim pass. */
  #freed = true;
  /** The last claim pass took all it asked for: there may be more. */
  #lastPassFull = true;
  #busySince: number | null = null;
  /** The first reap has ended. */
  #reaped = false;
  /** Work came due while the run waited: reap and fire again before the next pass. */
  #dueWork = false;
  /** Ended because nothing was claimable and nothing was in flight. */
  #idle = false;
  /** Ends the run's current wait: a push ended, work came due, a nudge, an abort. */
  #wakeUp: () => void = () => {};

  constructor(deps: DispatchDeps, options: RunOptions) {
    this.#deps = deps;
    this.#options = options;
    this.#config = deps.config;
    this.#db = deps.db;
    this.#timers = deps.timers ?? systemTimers;
    this.#log = deps.log ?? console;
    this.#meter = deps.meter ?? new Meter();
    this.#meter.add('dispatch_runs');
    const adaptive = this.#config.adaptiveQueues;
    // A settle finds out whether work waits only when the run would act on it (after a pass
    // that found less than it asked for); in a drain, passes are full and it reads nothing.
    this.#settler = new Settler(this.#db, adaptive, () => !this.#lastPassFull, this.#now);
    this.#queuesJson = this.#config.claimQueuesJson;
    const now = this.#now;
    const pushDeps: PushDeps = {
      keyring: deps.keyring,
      issuer: this.#config.issuer,
      webhookSecret: this.#config.webhookSecret,
      webhookSecretNext: this.#config.webhookSecretNext,
      allowPrivateTargets: this.#config.allowPrivateTargets,
      maxLeaseMs: this.#config.maxLeaseMs,
      now,
      transport: deps.transport ?? fetchTransport((input, init) => fetch(input, init)),
    };
    this.#record = outcomeRecorder({
      db: this.#db,
      settler: this.#settler,
      meter: this.#meter,
      report: this.report,
      log: this.#log,
      now,
      random: deps.random ?? Math.random,
      adaptiveQueues: adaptive,
      endpointPauseAfter: this.#config.endpointPauseAfter,
    });
    this.#ahead = new ClaimAhead(this.#config.dispatchParallelism, this.#config.maxClaimBatch);
    this.#deadline = now() + options.budgetMs;
    this.#retry = { timers: this.#timers, random: deps.random ?? Math.random };
    this.#dueReads = new DueReads(this.#db, this.report, this.#retry);
    this.#places = new Places({
      parallelism: this.#config.dispatchParallelism,
      now,
      stopped: this.#stopped,
      push: deps.push ?? ((task, waitedMs) => pushTask(task, pushDeps, waitedMs)),
      record: this.#record,
      settler: this.#settler,
      ahead: this.#ahead,
      pushed: deps.pushed,
      onFreed: (workWaits) => this.#placeFreed(workWaits),
      log: this.#log,
    });
  }

  readonly #now = () => this.#timers.now();
  readonly #stopped = () => this.#options.signal?.aborted === true;
  readonly #wake = () => this.#wakeUp();
  /** A place freed, or work came due: worth a claim pass. */
  readonly #free = () => {
    this.#freed = true;
    this.#wakeUp();
  };
  /** A place freed: a pass if it is worth one (pacing.ts), else only a look at the run's state. */
  #placeFreed(workWaits: boolean): void {
    if (freedPlaceWorthAPass(this.#lastPassFull, workWaits)) this.#free();
    else this.#wakeUp();
  }
  #progress(): number {
    return this.report.claimed + this.report.reaped + this.report.fired;
  }

  /** The cron's run: reap, write what it settled and its counters, nothing more. */
  async reapExpired(): Promise<RunReport> {
    await this.#reap();
    await this.#settler.flush();
    this.report.roundTrips += this.#settler.writes;
    await this.#meter.write(this.#db, { now: this.#now(), minIntervalMs: this.#deps.meterIntervalMs ?? 0 });
    return this.report;
  }

  /** The loop of a drain: reap and fire beside the first pass, then claim, push and wait until idle, stopped or out of budget. */
  async drain(): Promise<RunReport> {
    const config = this.#config;
    const options = this.#options;
    const reaping = this.#reapThenFire().finally(() => {
      this.#reaped = true;
      this.#wakeUp();
    });
    // While pushes are in flight the run waits for one to end; work that comes due meanwhile
    // wakes it through the watch, and then it reaps, fires and claims as at its start.
    const watch = new DueWatch({
      timers: this.#timers,
      probe: () => withDbRetry(() => nextDueInMs(this.#db), this.#retry),
      onDue: () => {
        this.#dueWork = true;
        this.#free();
      },
      onReadEnd: this.#wake,
      waiting: () => this.#places.inFlight.size > 0,
      log: this.#log,
    });
    options.signal?.addEventListener('abort', this.#wake, { once: true });
    options.nudges?.addEventListener(DUE_EVENT, this.#free);
    /** The counters' write, sent as the run ends: beside its last read, unless the run failed. */
    let metering: Promise<void> | null = null;
    let failed = true;
    try {
      const maxPushes = options.maxPushes ?? Number.POSITIVE_INFINITY;
      while (this.#now() < this.#deadline && this.report.claimed < maxPushes && !this.#stopped()) {
        if (this.#dueWork && this.#reaped) this.#reapAgain();
        const step = nextStep({
          parallelism: config.dispatchParallelism,
          maxClaimBatch: config.maxClaimBatch,
          maxPushes,
          claimed: this.report.claimed,
          inFlight: this.#places.inFlight.size,
          ready: this.#places.ready.length,
          ahead: this.#ahead.ahead,
          perClaim: this.#ahead.perClaim,
          settling: this.#places.settling.size,
          background: this.#background.size + (watch.reading ? 1 : 0),
          freed: this.#freed,
          lastPassFull: this.#lastPassFull,
          reaped: this.#reaped,
        });
        if (step.kind === 'claim') {
          await this.#claim(step.max);
          continue;
        }
        if (step.kind === 'idle') {
          if ((options.lingerMs ?? 0) > 0 && (await this.#linger())) continue;
          this.#idle = true;
          break;
        }
        if (this.#places.inFlight.size > 0) watch.arm();
        await new Promise<void>((resolve) => {
          this.#wakeUp = resolve;
        });
        // Pushes answered in the same turn free their places together: one pass for them all.
        if (this.#places.inFlight.size > 0) await nextTurn();
      }
      failed = false;
    } finally {
      options.nudges?.removeEventListener(DUE_EVENT, this.#free);
      options.signal?.removeEventListener('abort', this.#wake);
      watch.stop();
      // Whatever ends the run (a database error included), pushes already made are settled, and
      // tasks claimed ahead are pushed (their places free as pushes end), or, once the run is told
      // to stop, given back unused.
      await this.#places.empty();
      await Promise.all([reaping, Promise.allSettled(this.#background), watch.settled()]);
      await Promise.allSettled(this.#places.settling);
      await this.#settler.flush();
      metering = this.#meter.write(this.#db, { now: this.#now(), minIntervalMs: this.#deps.meterIntervalMs ?? 0 });
      if (failed) await metering;
    }
    this.report.roundTrips += this.#settler.writes + watch.reads;
    await this.#end(metering);
    return this.report;
  }

  /**
   * The run's end: stopped by its budget, not for want of work, whatever is left is due now;
   * idle, when the next thing comes due, read beside the counters' write (a lingering run's read
   * is fresh: it ended with nothing written since).
   */
  async #end(metering: Promise<void> | null): Promise<void> {
    this.report.more = !this.#idle && !this.#stopped();
    const reads = this.#dueReads;
    await Promise.all([
      metering,
      this.#idle && !this.#stopped() && reads.last === null ? reads.read().then((r) => (reads.last = r)) : null,
    ]);
    if (this.#idle && !this.#stopped()) this.report.nextDueInMs = reads.nextDueInMs();
  }

  /** Fires the schedules that came due; never throws (a schedule left due fires in the next run). */
  async #fire(): Promise<void> {
    try {
      const fired = await fireDueSchedules(this.#db, { log: this.#log });
      this.report.roundTrips += fired.statements;
      this.report.fired += fired.fired;
      if (fired.fired > 0) this.#freed = true;
    } catch (error) {
      this.#log.error('sluice: firing due schedules failed', loggable(error));
    }
  }

  /**
   * Reap: expired leases are attempts that timed out. On its own connection, beside the first
   * claim pass (which counts no expired lease as a slot), so it adds nothing to a push's
   * latency; a task it makes pending again is claimed once it ends, as if a place was freed.
   * Never throws: its leases stay expired, and the next run reaps them.
   */
  async #reap(): Promise<void> {
    this.report.roundTrips++;
    try {
      const expired = await withDbRetry(() => reapOverdue(this.#db, this.#options.reapLimit ?? 100), this.#retry);
      const settled = await Promise.all(
        expired.map((task) => {
          this.report.reaped++;
          this.#meter.add('lease_expiries', task.queue);
          // Only while still expired: a heartbeat that landed since the read wins.
          return this.#record(task, expiryOutcome(task, task.lease.expiresAt), null, 'expired');
        }),
      );
      if (settled.length > 0) this.#freed = true;
    } catch (error) {
      this.#log.error('sluice: reaping expired leases failed', loggable(error));
    }
  }

  /** Reaps, then fires the schedules that came due: their tasks are claimed as if a place was freed. */
  async #reapThenFire(): Promise<void> {
    await this.#reap();
    await this.#fire();
  }

  /** Work came due while the run waited: reap and fire again, beside the next pass. */
  #reapAgain(): void {
    this.#dueWork = false;
    const again = this.#reapThenFire().finally(() => {
      this.#background.delete(again);
      this.#free();
    });
    this.#background.add(again);
  }

  /** Claims up to `max` tasks: they take free places at once, and wait for one beyond them. */
  async #claim(max: number): Promise<number> {
    const report = this.report;
    const config = this.#config;
    report.claimPasses++;
    report.roundTrips++;
    // Cleared before the claim: a push that ends (or a nudge) while it runs sets it again.
    this.#freed = false;
    const sentAt = this.#now();
    // A claim whose reply was lost may have committed: retry only what surely did not run.
    const batch = await withDbRetry(() => taskClaimBatch(this.#db, { max, clusterCap: config.clusterCap, queuesJson: this.#queuesJson }), {
      ...this.#retry,
      idempotent: false,
    });
    const claimedAt = this.#now();
    report.lastClaimAtMs = sentAt;
    this.#ahead.claimTook(claimedAt - sentAt);
    this.#dueReads.roundTrip(claimedAt - sentAt);
    report.claimed += batch.length;
    this.#meter.add('claim_passes');
    for (const task of batch) {
      this.#meter.add('acquired', task.queue);
      // A first push only (a resume after a wait for children keeps its old due time), on the
      // database's clock at both ends: its claim, which the push follows at once.
      if (task.attempts === 1 && task.resumes === 0) {
        this.#meter.observe('due_to_push', task.queue, (task.lease.leasedAt.getTime() - task.runAt.getTime()) / 1000);
      }
    }
    this.#lastPassFull = batch.length === max;
    if (
      this.#lastPassFull &&
      (this.#busySince === null || this.#now() - this.#busySince >= BUSY_REPEAT_MS) &&
      this.#places.held + batch.length >= config.dispatchParallelism
    ) {
      this.#busySince = this.#now();
      this.#options.onBusy?.();
    }
    this.#places.take(batch, claimedAt);
    return batch.length;
  }

  /**
   * The run has nothing to claim: it waits `options.lingerMs` for work before it ends. Its tail
   * goes on meanwhile: the settles of its last pushes are written (a retry's due time with
   * them), then the next due time is read. A nudge or a settle that frees waiting work ends the
   * wait (claim now); so does the next due time, less a round trip, so that the claim reaches
   * Postgres as the task comes due. Returns whether to claim again.
   */
  async #linger(): Promise<boolean> {
    const until = Math.min(this.#now() + (this.#options.lingerMs ?? 0), this.#deadline);
    const { mine, stalled } = this.#dueReads.lingerBegins(this.#progress());
    let reading = true;
    const read: Promise<void> = (async () => {
      await Promise.allSettled(this.#places.settling);
      await this.#settler.flush();
      this.#dueReads.answered(mine, await this.#dueReads.read());
    })()
      .catch((error: unknown) => this.#log.warn('sluice: reading the next due time failed', loggable(error)))
      .finally(() => {
        reading = false;
        this.#background.delete(read);
        this.#wakeUp();
      });
    this.#background.add(read);
    for (;;) {
      if (this.#stopped()) return false;
      if (this.#freed) return true;
      const claimAt = this.#dueReads.claimAt(stalled);
      if (claimAt <= this.#now()) {
        // Due now: reaped, fired and claimed as at the run's start.
        this.#dueReads.actedOn(this.#progress());
        this.#dueWork = true;
        this.#freed = true;
        return true;
      }
      if (!reading && this.#now() >= until) return false;
      const wait = Math.max(0, Math.min(until, claimAt) - this.#now());
      await new Promise<void>((resolve) => {
        const timer = reading ? null : this.#timers.setTimeout(resolve, wait);
        this.#wakeUp = () => {
          if (timer !== null) this.#timers.clearTimeout(timer);
          resolve();
        };
      });
    }
  }
}
