/**
 * The dispatcher's clock and timers, passed in: tests move time instead of sleeping. Every
 * reading of the time and every timer in a run and in the loop goes through one `Timers`.
 */
export interface Timers {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemTimers: Timers = {
  // Read at each call, not bound once: a clock replaced later (a test's skewed Date.now) is the one read.
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};
