/** What a dispatcher run is given (`DispatchDeps`) and asked (`RunOptions`): dispatcher/run.ts. */
import type { Config } from '../config.ts';
import type { PushResult } from '../core/outcome.ts';
import type { LeasedTask } from '../core/types.ts';
import type { Db } from '../db/db.ts';
import type { PushTransport } from '../push/transport.ts';
import type { Keyring } from '../security/keyring.ts';
import type { Meter } from './meter.ts';
import type { Timers } from './timers.ts';

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
