/**
 * Retrying a database call through a passing fault: exponential backoff with full jitter.
 * Only idempotent calls retry every transient fault; a call that must not run twice (a claim)
 * retries only faults that prove the statement never ran.
 */

/** The statement was rolled back or never reached the server: running it again is safe. */
export function isNotStarted(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  if (typeof code === 'string') {
    // serialization failure, deadlock, too many connections, cannot connect now, refused
    return ['40001', '40P01', '53300', '57P03', 'ECONNREFUSED'].includes(code);
  }
  return false;
}

/** A fault that a second try may not hit: lost connections, restarts, deadlocks. */
export function isTransientDbError(error: unknown): boolean {
  if (isNotStarted(error)) return true;
  const code = (error as { code?: unknown })?.code;
  if (typeof code === 'string' && /^(08|57P0)|^E(CONNRESET|PIPE|TIMEDOUT|HOSTUNREACH|NETUNREACH)$/.test(code)) return true;
  const message = error instanceof Error ? error.message : '';
  return /Connection terminated|socket hang up|WebSocket|ECONNRESET|EPIPE/i.test(message);
}

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
