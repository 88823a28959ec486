/**
 * The Workers database paths, both through the Neon serverless driver:
 * - `openNeonDb`: a WebSocket Pool, for the dispatcher's shards (a Durable Object keeps it for
 *   the length of a drain) and for interactive transactions;
 * - `openNeonHttpDb`: for the API, where most requests are one statement: each query is one
 *   HTTPS request to Neon's query endpoint (no connection handshake), and only a transaction
 *   opens a WebSocket Pool. Chosen by measurement: see docs/operations.md "Database paths on Workers".
 * A stateless Worker's Pool must be opened and closed within its request; the caller closes.
 */
import { neon, neonConfig, Pool } from '@neondatabase/serverless';
import type { Config } from '../config.ts';
import { type OpenDb, poolDb, type Queryable } from './db.ts';

function configureLocalProxy(config: Config): void {
  if (!config.neonWsProxy) return;
  // Local development and tests: reach a plain Postgres through a local stand-in for Neon's
  // proxy (src/node/ws-proxy.ts): WebSocket at /v2, the HTTP query endpoint at /sql.
  const proxy = config.neonWsProxy;
  const host = proxy.slice(0, proxy.indexOf('/'));
  neonConfig.wsProxy = (h, port) => `${proxy}?address=${h}:${port}`;
  neonConfig.useSecureWebSocket = false;
  neonConfig.pipelineTLS = false;
  neonConfig.pipelineConnect = false;
  neonConfig.fetchEndpoint = () => `http://${host}/sql`;
}

/** A WebSocket Pool: a shard's (no wait for a connection is too long), or an API request's (`connectTimeoutMs`). */
export function openNeonDb(config: Config, connectTimeoutMs = 0): OpenDb {
  configureLocalProxy(config);
  // Two connections: a claim and a settle write may overlap.
  return poolDb(new Pool({ connectionString: config.databaseUrl, max: 2, connectionTimeoutMillis: connectTimeoutMs }));
}

/**
 * How long an API request waits for the database (a cold Neon compute resuming, a restart)
 * before it is answered 503 with Retry-After: a query's HTTP request, or a Pool's connection.
 * The shards wait as long as it takes.
 */
export const API_DB_WAIT_MS = 10_000;

export function openNeonHttpDb(config: Config): OpenDb {
  configureLocalProxy(config);
  const sql = neon(config.databaseUrl);
  let pool: OpenDb | null = null;
  // A query that times out fails as "Error connecting to database", a passing fault (503).
  const query: Queryable['query'] = async <R>(text: string, params?: readonly unknown[]) =>
    (await sql.query(text, params ? [...params] : [], { fetchOptions: { signal: AbortSignal.timeout(API_DB_WAIT_MS) } })) as R[];
  return {
    query,
    transaction(fn) {
      pool ??= poolDb(new Pool({ connectionString: config.databaseUrl, max: 1, connectionTimeoutMillis: API_DB_WAIT_MS }));
      return pool.transaction(fn);
    },
    close: async () => {
      await pool?.close();
    },
  };
}
