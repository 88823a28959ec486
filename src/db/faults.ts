/**
 * What a database error says about the database: rolled back or never started (safe to run
 * again), or a passing fault (a lost connection, a restart, no connection to be had in time).
 * The dispatcher retries on these (dispatcher/retry-db.ts); the API answers them with 503 and
 * `Retry-After`, never 500 (api/problem.ts).
 */

/** The statement was rolled back or never reached the server: running it again is safe. */
export function isNotStarted(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  if (typeof code === 'string') {
    // serialization failure, deadlock, too many connections, cannot connect now, refused
    return ['40001', '40P01', '53300', '57P03', 'ECONNREFUSED'].includes(code);
  }
  // node-postgres's pool found no connection within its connect timeout: nothing was sent.
  return (
    error instanceof Error && /timeout exceeded when trying to connect|Connection terminated due to connection timeout/i.test(error.message)
  );
}

/** A fault that a second try may not hit: lost connections, restarts, deadlocks, no connection in time. */
export function isTransientDbError(error: unknown): boolean {
  if (isNotStarted(error)) return true;
  const code = (error as { code?: unknown })?.code;
  if (typeof code === 'string') return /^(08|57P0)|^E(CONNRESET|PIPE|TIMEDOUT|HOSTUNREACH|NETUNREACH)$/.test(code);
  // Without a code, only the message tells; a message of an error that has one may quote the
  // client's input, so it is never read.
  const message = error instanceof Error ? error.message : '';
  // The last two: the Neon driver's HTTP path when its endpoint cannot be reached.
  return /Connection terminated|socket hang up|WebSocket|ECONNRESET|EPIPE|Error connecting to database|fetch failed/i.test(message);
}

/**
 * The database has no such schema, table, column or function: it was never migrated, or not for
 * this version of Sluice (db/migrate.ts `schemaState`). Not a client's doing, and not passing.
 */
export function isSchemaMismatch(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return typeof code === 'string' && ['3F000', '42P01', '42703', '42883'].includes(code);
}

/**
 * What to log of an error: a fault that passes (the database away, a connection lost) as its
 * message alone, one line, since the caller tries again and says so each time; anything else
 * whole, with its stack.
 */
export function loggable(error: unknown): unknown {
  return isTransientDbError(error) && error instanceof Error ? error.message : error;
}
