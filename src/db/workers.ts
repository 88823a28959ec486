/**
 * How the Worker reaches Postgres (`SLUICE_DATABASE_PATH`, docs/operations.md "Database paths on
 * Workers"): Neon's serverless driver (db/neon.ts: HTTP queries or a WebSocket Pool), or `pg`
 * over a TCP socket (`cloudflare:sockets`, under `nodejs_compat`) to a Hyperdrive binding, which
 * keeps warm pooled connections near the database. Hyperdrive pools in transaction mode, so no
 * session state is relied on: every statement is sent unnamed, and locks are transaction-scoped
 * (they are everywhere in Sluice). Its query cache must be off: Sluice's reads are never stale.
 */
import pg from 'pg';
import type { Config } from '../config.ts';
import { type OpenDb, poolDb } from './db.ts';
import { API_DB_WAIT_MS, openNeonDb, openNeonHttpDb } from './neon.ts';

/**
 * Connections a Hyperdrive pool holds: a Worker invocation may have 6 connections open at once,
 * and a shard's pushes need theirs (docs/operations.md).
 */
const HYPERDRIVE_POOL = { api: 1, dispatch: 2 } as const;

function openHyperdriveDb(config: Config, max: number, connectTimeoutMs: number): OpenDb {
  const pool = new pg.Pool({ connectionString: config.databaseUrl, max, connectionTimeoutMillis: connectTimeoutMs });
  let closing = false;
  // An idle client that loses its connection emits here; the pool replaces it. Closing the
  // pool cancels its sockets' reads, which pg-cloudflare reports the same way: not a fault.
  pool.on('error', (error) => {
    if (!closing) console.error('sluice: idle database connection failed', error.message);
  });
  const db = poolDb(pool, { named: false });
  return {
    ...db,
    close() {
      closing = true;
      return db.close();
    },
  };
}

/**
 * A request's database: HTTP queries or a Pool per request (`SLUICE_API_DATABASE`), or
 * Hyperdrive. It waits at most API_DB_WAIT_MS for the database, then the request is answered 503.
 */
export function openApiDb(config: Config): OpenDb {
  if (config.databasePath === 'hyperdrive') return openHyperdriveDb(config, HYPERDRIVE_POOL.api, API_DB_WAIT_MS);
  return config.apiDatabase === 'http' ? openNeonHttpDb(config) : openNeonDb(config, API_DB_WAIT_MS);
}

/** A shard's (and the cron's) database, kept for the length of a drain; it waits as long as it takes. */
export function openDispatchDb(config: Config): OpenDb {
  if (config.databasePath === 'hyperdrive') return openHyperdriveDb(config, HYPERDRIVE_POOL.dispatch, 0);
  return openNeonDb(config);
}
