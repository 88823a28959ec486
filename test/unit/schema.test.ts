/** The schema this version checks for at start (db/migrate.ts) is the last migration it ships; the SQL spells shared rules as the code does. */
import { expect, it } from 'vitest';
import { LATEST_MIGRATION } from '../../src/db/migrate.ts';
import { UNFINISHED_SQL } from '../../src/db/rows.ts';
import { readFunctions, readMigrations } from '../../src/node/migrations.ts';

it('LATEST_MIGRATION names the last numbered file in migrations/', async () => {
  const names = (await readMigrations()).map((m) => m.name);
  expect(LATEST_MIGRATION).toBe(names[names.length - 1]);
});

it('the living SQL functions spell the unfinished statuses as UNFINISHED_SQL does', async () => {
  // A status list naming both pending and leased tasks means "unfinished": it must be the one
  // list (src/db/rows.ts), so that a status added there cannot be missed here.
  const lists = (await readFunctions()).flatMap((f) =>
    [...f.sql.matchAll(/status in (\([^)]*\))/g)].map((m) => ({ file: f.name, list: m[1]! })),
  );
  const unfinished = lists.filter((l) => l.list.includes("'pending'") && l.list.includes("'leased'"));
  expect(unfinished.length).toBeGreaterThan(0);
  for (const l of unfinished) expect(l, l.file).toEqual({ file: l.file, list: UNFINISHED_SQL });
});
