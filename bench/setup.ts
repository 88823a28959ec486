/**
 * What every benchmark starts from: one embedded Postgres with a migrated database, the local
 * stand-in for Neon's proxy, an API key and a signing key, and the Worker bundled once.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { migrateDatabase } from '../src/node/migrations.ts';
import { startEmbeddedPostgres } from '../src/node/postgres.ts';
import { bundleWorker } from '../src/node/worker-runtime.ts';
import { startWsProxy } from '../src/node/ws-proxy.ts';
import { generateApiKey } from '../src/security/api-keys.ts';
import { generateSigningJwk } from '../src/security/keyring.ts';

export interface BenchSetup {
  databaseUrl: string;
  apiKey: string;
  /** Sluice's variables for this database, reached by the Worker through the proxy. */
  env: Record<string, string>;
  /** The Worker, bundled as wrangler would. */
  script: string;
  close(): Promise<void>;
}

export async function benchSetup(): Promise<BenchSetup> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-bench-'));
  const postgres = await startEmbeddedPostgres({ dir, persistent: false });
  const admin = new pg.Client(postgres.url('postgres'));
  await admin.connect();
  await admin.query('create database bench');
  if (process.env.BENCH_TRACE) await admin.query("alter database bench set track_functions = 'pl'");
  await admin.end();
  const databaseUrl = postgres.url('bench');
  await migrateDatabase(databaseUrl);
  const proxy = await startWsProxy({ host: '127.0.0.1', port: postgres.port });
  const key = await generateApiKey('bench');
  return {
    databaseUrl,
    apiKey: key.key,
    env: {
      DATABASE_URL: databaseUrl,
      SLUICE_API_KEYS: JSON.stringify([key.entry]),
      SLUICE_SIGNING_KEYS: JSON.stringify({ keys: [await generateSigningJwk('EdDSA', 'bench-1')] }),
      SLUICE_ALLOW_PRIVATE_TARGETS: 'true',
      SLUICE_NEON_WS_PROXY: proxy.address,
    },
    script: await bundleWorker(),
    async close() {
      await proxy.close();
      await postgres.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
