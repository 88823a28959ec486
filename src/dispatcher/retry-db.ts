/** Retrying a database call through a passing fault: exponential backoff with full jitter. */

const TRANSIENT_CODES = new Set([
  '40001', // serialization_failure
  '40P01', // deadlock_detected
  '53300', // too_many_connections
  '57P01', // admin_shutdown
  '57P03', // cannot_connect_now
  '08000', // connection_exception
  '08003',
  '08006',
]);

/** True for errors a second try may not hit: lost connections, deadlocks, restarts. */
export function isTransientDbError(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  if (typeof code === 'string') return TRANSIENT_CODES.has(code);
  const message = error instanceof Error ? error.message : '';
  return /ECONNRESET|ECONNREFUSED|EPIPE|Connection terminated|socket hang up|WebSocket|network/i.test(message);
}

export async function withDbRetry<T>(fn: () => Promise<T>, attempts = 4, baseMs = 50): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (error) {
      if (attempt >= attempts || !isTransientDbError(error)) throw error;
      await new Promise((r) => setTimeout(r, Math.random() * baseMs * 2 ** attempt));
    }
  }
}
