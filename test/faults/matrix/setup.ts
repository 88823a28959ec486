/**
 * What the full matrix runs on: its own embedded Postgres (which the Postgres fault restarts
 * as a crash would), a migrated database, generated secrets and the fault endpoint.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { migrateDatabase } from '../../../src/node/migrations.ts';
import { type RunningPostgres, startEmbeddedPostgres } from '../../../src/node/postgres.ts';
import { makeSecrets, testEnv } from '../../helpers/config.ts';
import type { Database } from './cluster.ts';

export interface MatrixPostgres {
  db: Database;
  port: number;
  close(): Promise<void>;
}

export async function startMatrixPostgres(): Promise<MatrixPostgres> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-faults-pg-'));
  let running: RunningPostgres = await startEmbeddedPostgres({ dir, persistent: true });
  const { port } = running;
  const admin = new pg.Client(running.url('postgres'));
  await admin.connect();
  await admin.query('create database faults');
  await admin.end();
  const url = running.url('faults');
  await migrateDatabase(url);
  return {
    port,
    db: {
      url,
      async restart() {
        // Immediate shutdown (SIGQUIT): no checkpoint, crash recovery at the next start.
        const pid = Number((await readFile(join(running.dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
        process.kill(pid, 'SIGQUIT');
        while (alive(pid)) await new Promise((r) => setTimeout(r, 20));
        running = await startEmbeddedPostgres({ dir, port, persistent: true });
      },
    },
    async close() {
      await running.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Sluice's secrets for a run, with Standard Webhooks on (so every push carries a `webhook-id`). */
export async function runSecrets(databaseUrl: string): Promise<{ env: Record<string, string>; apiKey: string }> {
  const secrets = await makeSecrets();
  return {
    env: testEnv(secrets, databaseUrl, { SLUICE_WEBHOOK_SECRET: `whsec_${randomBytes(32).toString('base64')}` }),
    apiKey: secrets.apiKey,
  };
}
