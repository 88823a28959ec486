/**
 * While a run waits on its pushes, other work may come due: a retry or a delayed task, a rate
 * limit's room, a schedule's slot, a lease's expiry. The watch reads when the next thing comes
 * due (at most once every `gapMs`) and calls `onDue` then, so that the run reaps, fires and
 * claims as at its start, rather than only when a push ends.
 */
import { loggable } from '../db/faults.ts';
import type { Timers } from './timers.ts';

/** The shortest gap between two reads of the next due time within a run. */
export const PROBE_GAP_MS = 250;

export interface DueWatchOptions {
  timers: Timers;
  /** Ms until the next thing comes due; `null` = nothing waits on time. */
  probe: () => Promise<number | null>;
  onDue: () => void;
  /** A read ended: a run waiting with nothing else running can see that it is done. */
  onReadEnd: () => void;
  /** Whether the run still waits on pushes when a postponed read comes round. */
  waiting: () => boolean;
  log: Pick<Console, 'warn'>;
  gapMs?: number;
}

export class DueWatch {
  #o: DueWatchOptions;
  #gapMs: number;
  #dueTimer: unknown = null;
  #gapTimer: unknown = null;
  #reading: Promise<void> | null = null;
  #lastProbe = Number.NEGATIVE_INFINITY;
  #stopped = false;

  constructor(options: DueWatchOptions) {
    this.#o = options;
    this.#gapMs = options.gapMs ?? PROBE_GAP_MS;
  }

  /** Reads of the next due time made: database round trips, for the run report. */
  reads = 0;

  /** A read is in flight. */
  get reading(): boolean {
    return this.#reading !== null;
  }

  /** Resolves once no read is in flight (reads never reject). */
  async settled(): Promise<void> {
    while (this.#reading) await this.#reading;
  }

  /**
   * Makes sure the run hears when the next thing comes due: reads it now, unless a read or a
   * wake-up is already pending, or it is too soon after the last read (then the read follows at
   * the end of the gap, if the run still waits).
   */
  arm(): void {
    if (this.#stopped || this.#reading || this.#dueTimer !== null || this.#gapTimer !== null) return;
    const { timers } = this.#o;
    const wait = this.#lastProbe + this.#gapMs - timers.now();
    if (wait > 0) {
      this.#gapTimer = timers.setTimeout(() => {
        this.#gapTimer = null;
        if (this.#o.waiting()) this.arm();
      }, wait);
      return;
    }
    this.#lastProbe = timers.now();
    this.reads++;
    this.#reading = this.#o
      .probe()
      .then((ms) => {
        if (ms === null || this.#stopped) return;
        this.#dueTimer = timers.setTimeout(() => {
          this.#dueTimer = null;
          this.#o.onDue();
        }, ms);
      })
      .catch((error: unknown) => this.#o.log.warn('sluice: reading the next due time failed', loggable(error)))
      .finally(() => {
        this.#reading = null;
        this.#o.onReadEnd();
      });
  }

  /** No more reads or wake-ups (the run is ending). */
  stop(): void {
    this.#stopped = true;
    if (this.#dueTimer !== null) this.#o.timers.clearTimeout(this.#dueTimer);
    if (this.#gapTimer !== null) this.#o.timers.clearTimeout(this.#gapTimer);
    this.#dueTimer = this.#gapTimer = null;
  }
}
