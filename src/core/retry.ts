/** Retry backoff: exponential, capped, with symmetric jitter. Pure: randomness is passed in. */
import type { Backoff } from './types.ts';

/**
 * Delay before the attempt that follows failed attempt number `attempt` (1-based).
 * `random` is a number in [0, 1); 0.5 gives the un-jittered delay.
 */
export function backoffDelayMs(backoff: Backoff, attempt: number, random: number): number {
  const exponent = Math.max(0, attempt - 1);
  const base = Math.min(backoff.maxMs, backoff.initialMs * backoff.factor ** exponent);
  const jittered = base * (1 + backoff.jitter * (2 * random - 1));
  return Math.max(0, Math.min(backoff.maxMs, Math.round(jittered)));
}

/**
 * The wait before try `n + 1` of something that failed `n` times in a row (`n` ≥ 1): `firstMs`,
 * doubling each time, at most `maxMs`. With `random` in [0, 1) (full jitter), that much of it:
 * callers that retry together then spread out. The one doubling backoff of Sluice's own loops:
 * the database retry, the dispatch loop after a failed run, a stall's sleep, the wake channel's
 * reconnect, and the CLI's `listen` and `tail`.
 */
export function doublingBackoffMs(n: number, firstMs: number, maxMs: number, random?: number): number {
  const ms = Math.min(maxMs, firstMs * 2 ** Math.min(Math.max(0, n - 1), 40));
  return random === undefined ? ms : ms * random;
}
