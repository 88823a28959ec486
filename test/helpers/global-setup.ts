/** Starts one embedded Postgres for the whole run, with a migrated template database. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { migrateDatabase } from '../../src/node/migrations.ts';
import { startEmbeddedPostgres } from '../../src/node/postgres.ts';

export const TEMPLATE_DB = 'sluice_template';

declare module 'vitest' {
  export interface ProvidedContext {
    pgAdminUrl: string;
    pgPort: number;
  }
}

export default async function setup(project: TestProject) {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-test-pg-'));
  // pg_stat_statements counts every statement a database is sent, at once (test/helpers/db-activity.ts).
  const postgres = await startEmbeddedPostgres({ dir, persistent: false, settings: { shared_preload_libraries: 'pg_stat_statements' } });
  const admin = new pg.Client(postgres.url('postgres'));
  await admin.connect();
  await admin.query('create extension pg_stat_statements');
  await admin.query(`create database ${TEMPLATE_DB}`);
  await admin.end();
  await migrateDatabase(postgres.url(TEMPLATE_DB));
  project.provide('pgAdminUrl', postgres.url('postgres'));
  project.provide('pgPort', postgres.port);
  return async () => {
    await postgres.stop();
    await rm(dir, { recursive: true, force: true });
  };
}
