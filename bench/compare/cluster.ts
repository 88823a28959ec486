/**
 * The one Postgres every contender runs on (embedded, started once), and a fresh database per
 * contender per iteration: created, handed over, dropped.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { type RunningPostgres, startEmbeddedPostgres } from '../../src/node/postgres.ts';

/** Server settings for every run: durable writes off (as in the earlier runs), statement counts on. */
export const PG_SETTINGS: Readonly<Record<string, string>> = Object.freeze({
  fsync: 'off',
  shared_preload_libraries: 'pg_stat_statements',
});

/** Harness queries carry this alias, so that statement counts can leave them out. */
export const PROBE = 'harness_probe';

export interface Cluster {
  /** The postmaster: its process tree is what Postgres CPU is read from. */
  postmasterPid: number;
  version: string;
  /** A connection to the `postgres` database, for admin work and pg_stat_statements. */
  admin: pg.Pool;
  database(name: string): Promise<Database>;
  stop(): Promise<void>;
}

export interface Database {
  name: string;
  url: string;
  /** Two connections for the harness's own reads and maintenance in this database. */
  pool: pg.Pool;
  /** `ANALYZE`, `CHECKPOINT`, and the statement counters zeroed: what precedes every timed drain. */
  settle(): Promise<void>;
  drop(): Promise<void>;
}

export async function startCluster(): Promise<Cluster> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-compare-'));
  const postgres: RunningPostgres = await startEmbeddedPostgres({ dir, persistent: false, settings: { ...PG_SETTINGS } });
  const admin = new pg.Pool({ connectionString: postgres.url('postgres'), max: 2 });
  admin.on('error', () => {});
  await admin.query('create extension if not exists pg_stat_statements');
  const [row] = (await admin.query<{ server_version: string }>('show server_version')).rows;
  const pid = Number((await readFile(join(postgres.dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
  return {
    postmasterPid: pid,
    version: row?.server_version ?? 'unknown',
    admin,
    async database(name) {
      await admin.query(`drop database if exists ${name} with (force)`);
      await admin.query(`create database ${name}`);
      const url = postgres.url(name);
      const pool = new pg.Pool({ connectionString: url, max: 2 });
      pool.on('error', () => {});
      return {
        name,
        url,
        pool,
        async settle() {
          await pool.query('analyze');
          await admin.query('checkpoint');
          await admin.query('select pg_stat_statements_reset()');
        },
        async drop() {
          await pool.end();
          // A library may close its pool a moment after its stop resolved; forcing its
          // connections closed then makes its idle clients emit errors nobody listens to.
          for (let i = 0; i < 100 && (await connections(admin, name)) > 0; i++) await new Promise((r) => setTimeout(r, 50));
          await admin.query(`drop database if exists ${name} with (force)`);
        },
      };
    },
    async stop() {
      await admin.end();
      await postgres.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function connections(admin: pg.Pool, database: string): Promise<number> {
  const [row] = (await admin.query<{ n: number }>('select count(*)::int as n from pg_stat_activity where datname = $1', [database])).rows;
  return row?.n ?? 0;
}
