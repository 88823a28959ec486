/** The Node database path: one node-postgres Pool for the life of the process. */
import pg from 'pg';
import { type OpenDb, poolDb } from '../db/db.ts';

/**
 * `connectTimeoutMs`: how long a query waits for a connection (a new one, or a pooled one under
 * load) before it fails as unavailable, which the API answers with 503 and `Retry-After`: under
 * overload or an outage a request is refused in time, never left hanging. 0 waits as long as it
 * takes (the dispatcher's pool).
 */
export function openPgDb(databaseUrl: string, max = 10, connectTimeoutMs = 5_000): OpenDb {
  const pool = new pg.Pool({ connectionString: databaseUrl, max, connectionTimeoutMillis: connectTimeoutMs });
  // An idle client that loses its connection emits here; the pool replaces it.
  pool.on('error', (error) => console.error('sluice: idle database connection failed', error.message));
  return poolDb(pool);
}
