/** The schema this version checks for at start (db/migrate.ts) is the last migration it ships. */
import { expect, it } from 'vitest';
import { LATEST_MIGRATION } from '../../src/db/migrate.ts';
import { readMigrations } from '../../src/node/migrations.ts';

it('LATEST_MIGRATION names the last numbered file in migrations/', async () => {
  const names = (await readMigrations()).map((m) => m.name);
  expect(LATEST_MIGRATION).toBe(names[names.length - 1]);
});
