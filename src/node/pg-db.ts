/** The Node database path: one node-postgres Pool for the life of the process. */
import pg from 'pg';
import { type OpenDb, poolDb } from '../db/db.ts';

export function openPgDb(databaseUrl: string, max = 10): OpenDb {
  const pool = new pg.Pool({ connectionString: databaseUrl, max });
  // An idle client that loses its connection emits here; the pool replaces it.
  pool.on('error', (error) => console.error('sluice: idle database connection failed', error.message));
  return poolDb(pool);
}
