/**
 * The Workers database path: a Neon driver Pool per invocation (a Pool kept across requests
 * hangs workerd). The caller closes it, normally with `ctx.waitUntil(db.close())`.
 */
import { neonConfig, Pool } from '@neondatabase/serverless';
import type { Config } from '../config.ts';
import { type OpenDb, poolDb } from './db.ts';

export function openNeonDb(config: Config): OpenDb {
  if (config.neonWsProxy) {
    // Local development and tests: reach a plain Postgres through a WebSocket→TCP proxy.
    const proxy = config.neonWsProxy;
    neonConfig.wsProxy = (host, port) => `${proxy}?address=${host}:${port}`;
    neonConfig.useSecureWebSocket = false;
    neonConfig.pipelineTLS = false;
    neonConfig.pipelineConnect = false;
  }
  // Two connections: a claim and a settle write may overlap. With the default parallelism of
  // 4 pushes that stays within Workers' 6 simultaneous connections per invocation.
  return poolDb(new Pool({ connectionString: config.databaseUrl, max: 2 }));
}
