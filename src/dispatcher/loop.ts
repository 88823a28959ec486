/**
 * The dispatcher of a long-lived process (self-hosting on Node, Bun or Deno): one run at a
 * time, and between runs a sleep until the next due time (docs/DESIGN.md §6), never a fixed tick.
 * A poke (this process's API, or another instance's through LISTEN/NOTIFY) wakes it earlier;
 * a poke during a run makes another run follow it, so no wake-up is lost. `maxSleepMs` is
 * only the fallback for wake-ups that never arrive, and none is made at rest (core/rest.ts).
 */

import { doublingBackoffMs } from '../core/retry.ts';
import { isStall, wakeAt } from '../core/wake.ts';
import { loggable } from '../db/faults.ts';
import type { RunReport } from './report.ts';
import { DUE_EVENT } from './run-options.ts';
import { systemTimers, type Timers } from './timers.ts';

export interface LoopOptions {
  /** The longest sleep when nothing is due: the fallback poll. */
  maxSleepMs: number;
  /** True while the process is at rest (core/rest.ts): no fallback poll, only wake-ups and due times. */
  resting?: () => boolean;
  /** After a failed run, wait this long (doubling up to `maxSleepMs`) before the next. */
  errorBackoffMs?: number;
  timers?: Timers;
  onError?: (error: unknown) => void;
}

export class DispatchLoop {
  #run: (signal: AbortSignal, nudges: EventTarget) => Promise<RunReport>;
  #nudges = new EventTarget();
  #options: Required<Omit<LoopOptions, 'timers' | 'onError' | 'resting'>>;
  #resting: () => boolean;
  #timers: Timers;
  #onError: (error: unknown) => void;
  #running: Promise<void> | null = null;
  #again = false;
  #timer: { handle: unknown; atMs: number } | null = null;
  #abort = new AbortController();
  #failures = 0;
  /** Runs in a row that claimed nothing yet read work due now (core/wake.ts `isStall`). */
  #stalls = 0;
  /** A wake-up for a future time that arrived during a run: honoured after it. */
  #pendingAt = Number.POSITIVE_INFINITY;
  /** When a wake-up for now last came during a run: one the run's last claim was sent after is served. */
  #againAt = Number.NEGATIVE_INFINITY;

  constructor(run: (signal: AbortSignal, nudges: EventTarget) => Promise<RunReport>, options: LoopOptions) {
    this.#run = run;
    this.#options = { maxSleepMs: options.maxSleepMs, errorBackoffMs: options.errorBackoffMs ?? 250 };
    this.#timers = options.timers ?? systemTimers;
    this.#resting = options.resting ?? (() => false);
    this.#onError = options.onError ?? ((e) => console.error('sluice: dispatcher run failed', loggable(e)));
  }

  /** Work comes due at `atMs` (default: now). Runs now, or makes sure a run starts by then. */
  wake(atMs?: number): void {
    if (this.#abort.signal.aborted) return;
    if (atMs !== undefined && atMs > this.#timers.now()) {
      if (!this.#running) this.#sleepUntil(atMs);
      else this.#pendingAt = Math.min(this.#pendingAt, atMs);
      return;
    }
    if (this.#running) {
      // The run claims again now if it is waiting on pushes (or lingering), and another run
      // follows it in case it was past its last claim.
      this.#again = true;
      this.#againAt = this.#timers.now();
      this.#nudges.dispatchEvent(new Event(DUE_EVENT));
      return;
    }
    this.#clearTimer();
    this.#running = this.#loop();
  }

  start(): void {
    this.wake();
  }

  /** Stops claiming, lets pushes in flight finish and settle, and resolves when all is done. */
  async stop(): Promise<void> {
    this.#abort.abort();
    this.#clearTimer();
    await this.#running;
  }

  async #loop(): Promise<void> {
    let next: number;
    for (;;) {
      this.#again = false;
      try {
        const report = await this.#run(this.#abort.signal, this.#nudges);
        this.#failures = 0;
        // Every wake-up during the run came before its last claim: that claim served them.
        if (report.lastClaimAtMs !== null && this.#againAt < report.lastClaimAtMs) this.#again = false;
        this.#stalls = isStall(report) ? this.#stalls + 1 : 0;
        const fallbackMs = this.#resting() ? Number.POSITIVE_INFINITY : this.#options.maxSleepMs;
        next = wakeAt(report, this.#timers.now(), fallbackMs, this.#stalls);
      } catch (error) {
        this.#onError(error);
        this.#failures++;
        next = this.#timers.now() + doublingBackoffMs(this.#failures, this.#options.errorBackoffMs, this.#options.maxSleepMs);
      }
      if (this.#abort.signal.aborted) break;
      next = Math.min(next, this.#pendingAt);
      this.#pendingAt = Number.POSITIVE_INFINITY;
      // A poke that came during the run, or work already due: run again at once (after a
      // failure, only once the backoff has passed).
      if (this.#failures === 0 && (this.#again || next <= this.#timers.now())) continue;
      this.#running = null;
      this.#sleepUntil(next);
      return;
    }
    this.#running = null;
  }

  /** Sleeps until `atMs`, unless a wake-up is set for earlier already. */
  #sleepUntil(atMs: number): void {
    if (this.#timer && this.#timer.atMs <= atMs) return;
    this.#clearTimer();
    if (!Number.isFinite(atMs)) return;
    const handle = this.#timers.setTimeout(
      () => {
        this.#timer = null;
        this.wake();
      },
      Math.max(0, atMs - this.#timers.now()),
    );
    this.#timer = { handle, atMs };
  }

  #clearTimer(): void {
    if (this.#timer) this.#timers.clearTimeout(this.#timer.handle);
    this.#timer = null;
  }
}
