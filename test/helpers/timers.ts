/** A clock and timers that only move when the test says so (dispatcher/timers.ts `Timers`). */
import type { Timers } from '../../src/dispatcher/timers.ts';

/** Lets promises and zero timeouts of the real event loop run. */
export const flush = () => new Promise((r) => setTimeout(r, 0));

export function manualTimers(startMs = 0) {
  let now = startMs;
  let nextId = 1;
  const pending = new Map<number, { at: number; fn: () => void }>();
  const timers: Timers = {
    now: () => now,
    setTimeout(fn, ms) {
      const id = nextId++;
      pending.set(id, { at: now + ms, fn });
      return id;
    },
    clearTimeout(handle) {
      pending.delete(handle as number);
    },
  };
  return {
    timers,
    pending,
    /** When the next timer fires, if any is set. */
    nextAt: () => Math.min(...[...pending.values()].map((p) => p.at)),
    /** Moves the clock on, fires the timers now due, then lets what they started run. */
    async advance(ms: number) {
      now += ms;
      for (const [id, p] of [...pending]) {
        if (p.at <= now) {
          pending.delete(id);
          p.fn();
        }
      }
      await flush();
    },
  };
}
