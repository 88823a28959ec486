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
