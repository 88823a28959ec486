/** A fresh, migrated database per test file, cloned from the run's template. */
import pg from 'pg';
import { inject } from 'vitest';
import type { OpenDb } from '../../src/db/db.ts';
import { openPgDb } from '../../src/node/pg-db.ts';

export interface TestDatabase {
  url: string;
  /** A pool on this database (closed by `drop`). */
  db: OpenDb;
  drop(): Promise<void>;
}

/** `empty`: a database with no schema at all, as a new one is before `npm run db:migrate`. */
export async function createTestDatabase(options: { empty?: boolean } = {}): Promise<TestDatabase> {
  const adminUrl = inject('pgAdminUrl');
  const name = `t_${crypto.randomUUID().replace(/-/g, '').slice(0, 16)}`;
  await adminQuery(adminUrl, options.empty ? `create database ${name}` : `create database ${name} template sluice_template`);
  const url = adminUrl.replace(/\/postgres$/, `/${name}`);
  const db = openPgDb(url, 20);
  return {
    url,
    db,
    async drop() {
      await db.close();
      await adminQuery(adminUrl, `drop database if exists ${name} with (force)`);
    },
  };
}

async function adminQuery(url: string, sql: string): Promise<void> {
  // Cloning from a template fails while another clone is being made from it: retry.
  for (let attempt = 1; ; attempt++) {
    const client = new pg.Client(url);
    await client.connect();
    try {
      await client.query(sql);
      return;
    } catch (error) {
      if (attempt >= 20 || !/is being accessed by other users/.test((error as Error).message)) throw error;
    } finally {
      await client.end();
    }
    await new Promise((r) => setTimeout(r, 50 * attempt));
  }
}

/**
 * Empties tables between tests while a dispatcher of the test may still be running (a Worker, a
 * Node loop): under the claim's lock, so that no claim pass is midway, and tasks first, as every
 * other statement takes them. A bare TRUNCATE could deadlock with a claim pass holding a lane
 * and waiting for the tasks table.
 */
export async function emptyTables(db: OpenDb, tables: string): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query('select sluice.claim_lock()');
    // The hot table's rows go with their history (0014_history.sql): finished tasks and
    // attempts, and what their pushes taught their levels (0016_levels.sql): holds, learnt limits,
    // and their origins (0027_endpoints.sql): pauses, holds, counts.
    const all = /\bsluice\.tasks\b/.test(tables)
      ? `${tables}, sluice.finished, sluice.attempts, sluice.levels, sluice.endpoints, sluice.endpoint_minutes`
      : tables;
    await tx.query(`truncate ${all} cascade`);
  });
}
