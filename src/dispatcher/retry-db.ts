/**
 * Retrying a database call through a passing fault: doubling backoff with full jitter
 * (core/retry.ts). Only idempotent calls retry every transient fault; a call that must not run
 * twice (a claim) retries only faults that prove the statement never ran (what each fault means:
 * db/faults.ts).
 */
import { doublingBackoffMs } from '../core/retry.ts';
import { isNotStarted, isTransientDbError } from '../db/faults.ts';
import { systemTimers, type Timers } from './timers.ts';

export interface RetryOptions {
  /** True when running the call twice is harmless. Default true. */
  idempotent?: boolean;
  attempts?: number;
  /** The first wait's bound: a random part of twice this, doubling each time. */
  baseMs?: number;
  /** The timers the waits run on, and the randomness that spreads them; default the system's. */
  timers?: Timers;
  random?: () => number;
}

export async function withDbRetry<T>(fn: () => Promise<T>, options: RetryOptions = {}): Promise<T> {
  const { idempotent = true, attempts = 4, baseMs = 50, timers = systemTimers, random = Math.random } = options;
  const retryable = idempotent ? isTransientDbError : isNotStarted;
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (error) {
      if (attempt >= attempts || !retryable(error)) throw error;
      await new Promise((r) =>
        timers.setTimeout(() => r(undefined), doublingBackoffMs(attempt, 2 * baseMs, Number.POSITIVE_INFINITY, random())),
      );
    }
  }
}
