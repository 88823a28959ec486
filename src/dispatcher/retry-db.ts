/**
 * Retrying a database call through a passing fault: exponential backoff with full jitter.
 * Only idempotent calls retry every transient fault; a call that must not run twice (a claim)
 * retries only faults that prove the statement never ran (what each fault means: db/faults.ts).
 */
import { isNotStarted, isTransientDbError } from '../db/faults.ts';

export interface RetryOptions {
  /** True when running the call twice is harmless. Default true. */
  idempotent?: boolean;
  attempts?: number;
  baseMs?: number;
}

export async function withDbRetry<T>(fn: () => Promise<T>, options: RetryOptions = {}): Promise<T> {
  const { idempotent = true, attempts = 4, baseMs = 50 } = options;
  const retryable = idempotent ? isTransientDbError : isNotStarted;
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (error) {
      if (attempt >= attempts || !retryable(error)) throw error;
      await new Promise((r) => setTimeout(r, Math.random() * baseMs * 2 ** attempt));
    }
  }
}
