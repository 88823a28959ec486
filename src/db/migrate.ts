/**
 * The migration runner: applies numbered, forward-only SQL files in order, then the function
 * files (`migrations/functions/*.sql`, `create or replace`), each again whenever it changed:
 * a function has one living home instead of a copy in every migration that touches it. Safe to
 * run twice and from two processes at once: it holds a transaction-scoped advisory lock, and
 * each applied file is recorded with its checksum (a changed numbered file is refused).
 */

import { sha256Hex } from '../security/api-keys.ts';
import type { Db, Queryable } from './db.ts';
import { ADVISORY_LOCKS } from './locks.ts';

export interface Migration {
  /** File name, e.g. `0001_init.sql`; the order is the names' order. */
  name: string;
  sql: string;
}

/** Applies the pending migrations and changed function files; returns the names applied by this call. */
export async function migrate(db: Db, migrations: readonly Migration[], functions: readonly Migration[] = []): Promise<string[]> {
  const ordered = [...migrations].sort((a, b) => a.name.localeCompare(b.name));
  return db.transaction(async (tx) => {
    await tx.query('select pg_advisory_xact_lock($1)', [ADVISORY_LOCKS.migrations]);
    // An advisory lock does not make this backend take in the catalog changes that the previous
    // holder committed meanwhile (its caches catch up when it locks a relation), so a
    // `create schema if not exists` here could miss the schema just made and fail as a
    // duplicate. Locking a catalog relation brings them in.
    await tx.query('lock table pg_catalog.pg_namespace in access share mode');
    await tx.query(`create schema if not exists sluice;
      create table if not exists sluice.migrations (
        name text primary key,
        checksum text not null,
        applied_at timestamptz not null default now()
      )`);
    const rows = await tx.query<{ name: string; checksum: string }>('select name, checksum from sluice.migrations');
    const applied = new Map(rows.map((r) => [r.name, r.checksum]));
    const done: string[] = [];
    for (const m of ordered) {
      const checksum = await sha256Hex(m.sql);
      const seen = applied.get(m.name);
      if (seen !== undefined) {
        if (seen !== checksum) throw new Error(`migration ${m.name} was changed after it was applied; add a new migration instead`);
        continue;
      }
      await tx.query(m.sql);
      await tx.query('insert into sluice.migrations (name, checksum) values ($1, $2)', [m.name, checksum]);
      done.push(m.name);
    }
    await tx.query(`create table if not exists sluice.functions (
        name text primary key,
        checksum text not null,
        applied_at timestamptz not null default now()
      )`);
    const current = new Map(
      (await tx.query<{ name: string; checksum: string }>('select name, checksum from sluice.functions')).map((r) => [r.name, r.checksum]),
    );
    for (const f of [...functions].sort((a, b) => a.name.localeCompare(b.name))) {
      const checksum = await sha256Hex(f.sql);
      if (current.get(f.name) === checksum) continue;
      await tx.query(f.sql);
      await tx.query(
        `insert into sluice.functions (name, checksum) values ($1, $2)
         on conflict (name) do update set checksum = excluded.checksum, applied_at = now()`,
        [f.name, checksum],
      );
      done.push(`functions/${f.name}`);
    }
    return done;
  });
}

/**
 * The last numbered migration this version of Sluice is written for (test/unit/schema.test.ts
 * holds it to the last file in migrations/).
 */
export const LATEST_MIGRATION = '0027_endpoints.sql';

/** What to do about a schema that is not this version's, in one line. */
export const MIGRATE_HINT = 'run `npm run db:migrate` (DATABASE_URL set) to migrate it';

export type SchemaState = 'current' | 'missing' | 'behind' | 'ahead';

/** Whether the database holds the schema this version expects: none yet, an older one, a newer one. */
export async function schemaState(db: Queryable): Promise<SchemaState> {
  const [has] = await db.query<{ ok: boolean }>("select to_regclass('sluice.migrations') is not null as ok");
  if (!has?.ok) return 'missing';
  const [row] = await db.query<{ latest: string | null }>('select max(name) as latest from sluice.migrations');
  const latest = row?.latest ?? null;
  if (latest === null) return 'missing';
  return latest === LATEST_MIGRATION ? 'current' : latest < LATEST_MIGRATION ? 'behind' : 'ahead';
}

/** The line an operator reads when the schema is not this version's. */
export function schemaProblem(state: Exclude<SchemaState, 'current'>): string {
  switch (state) {
    case 'missing':
      return `the database has no Sluice schema: ${MIGRATE_HINT}`;
    case 'behind':
      return `the database's schema is older than this version of Sluice (it needs ${LATEST_MIGRATION}): ${MIGRATE_HINT}`;
    case 'ahead':
      return `the database's schema is newer than this version of Sluice (a newer one migrated it): run the newer version`;
  }
}
