/** Reads `migrations/*.sql` and applies them (Node-only: it reads files). */
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { type Migration, migrate } from '../db/migrate.ts';
import { openPgDb } from './pg-db.ts';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));

export async function readMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const names = (await readdir(dir)).filter((n) => /^\d{4}_[\w-]+\.sql$/.test(n)).sort();
  return Promise.all(names.map(async (name) => ({ name, sql: await readFile(`${dir}/${name}`, 'utf8') })));
}

/** The function files (`migrations/functions/*.sql`), re-applied whenever they change. */
export async function readFunctions(dir = `${MIGRATIONS_DIR}functions`): Promise<Migration[]> {
  const names = (await readdir(dir)).filter((n) => /^[\w-]+\.sql$/.test(n)).sort();
  return Promise.all(names.map(async (name) => ({ name, sql: await readFile(`${dir}/${name}`, 'utf8') })));
}

export async function migrateDatabase(databaseUrl: string): Promise<string[]> {
  const db = openPgDb(databaseUrl, 1);
  try {
    return await migrate(db, await readMigrations(), await readFunctions());
  } finally {
    await db.close();
  }
}
