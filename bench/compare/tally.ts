/**
 * The harness's handlers. `DrainTally` counts completions (the N-th stops the clock) and, for keyed
 * jobs, checks the limit (no two of a key at once) and FIFO within a key. `LatencyProbe` notes
 * when each job reached its handler, on this process's clock.
 */
import { performance } from 'node:perf_hooks';
import { setImmediate } from 'node:timers/promises';
import type { BenchJob, Handler } from './contender.ts';

export class DrainTally implements Handler {
  done = 0;
  /** Jobs started while another of their key was running. */
  overlaps = 0;
  /** Resolves with the clock at the N-th completion. */
  readonly finished: Promise<number>;
  private resolve: (at: number) => void = () => {};
  private readonly running = new Map<string, number>();
  private readonly starts = new Map<string, number[]>();
  private readonly expected: number;

  constructor(expected: number) {
    this.expected = expected;
    this.finished = new Promise((resolve) => {
      this.resolve = resolve;
    });
  }

  async handle(job: BenchJob): Promise<void> {
    const key = job.key;
    if (key !== null) {
      const running = (this.running.get(key) ?? 0) + 1;
      this.running.set(key, running);
      if (running > 1) this.overlaps++;
      const starts = this.starts.get(key) ?? [];
      starts.push(job.seq);
      this.starts.set(key, starts);
    }
    // A turn of the event loop: a job "runs" long enough for another of its key to overlap it.
    await setImmediate();
    if (key !== null) this.running.set(key, (this.running.get(key) ?? 1) - 1);
    this.done++;
    if (this.done === this.expected) this.resolve(performance.now());
  }

  /** Jobs that started before an earlier job of their key did (0 = FIFO held). */
  fifoViolations(): number {
    let count = 0;
    for (const starts of this.starts.values()) {
      let lowestLater = Number.POSITIVE_INFINITY;
      for (let i = starts.length - 1; i >= 0; i--) {
        const seq = starts[i] as number;
        if (seq > lowestLater) count++;
        lowestLater = Math.min(lowestLater, seq);
      }
    }
    return count;
  }

  /** Jobs handled more than once (a retry or a double delivery). */
  duplicates(): number {
    return Math.max(0, this.done - this.expected);
  }
}

export class LatencyProbe implements Handler {
  readonly arrived = new Map<number, number>();
  private waiter: { i: number; resolve: () => void } | null = null;

  async handle(job: BenchJob): Promise<void> {
    this.arrived.set(job.i, performance.now());
    if (this.waiter?.i === job.i) this.waiter.resolve();
  }

  /** Resolves once job `i` has reached the handler. */
  arrival(i: number, timeoutMs = 10_000): Promise<number> {
    const at = this.arrived.get(i);
    if (at !== undefined) return Promise.resolve(at);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`job ${i} did not arrive within ${timeoutMs} ms`)), timeoutMs);
      this.waiter = {
        i,
        resolve: () => {
          clearTimeout(timer);
          this.waiter = null;
          resolve(this.arrived.get(i) as number);
        },
      };
    });
  }
}
