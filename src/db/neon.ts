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

export function openNeonDb(config: Config): OpenDb {
  configureLocalProxy(config);
  // Two connections: a claim and a settle write may overlap.
  return poolDb(new Pool({ connectionString: config.databaseUrl, max: 2 }));
}

export function openNeonHttpDb(config: Config): OpenDb {
  configureLocalProxy(config);
  const sql = neon(config.databaseUrl);
  let pool: OpenDb | null = null;
  const query: Queryable['query'] = async <R>(text: string, params?: readonly unknown[]) =>
    (await sql.query(text, params ? [...params] : [])) as R[];
  return {
    query,
    transaction(fn) {
      pool ??= poolDb(new Pool({ connectionString: config.databaseUrl, max: 1 }));
      return pool.transaction(fn);
    },
    close: async () => {
      await pool?.close();
    },
  };
}
