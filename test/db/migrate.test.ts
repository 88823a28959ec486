import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.ts';
import { readMigrations } from '../../src/node/migrations.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(() => t.drop());

describe('migrations', () => {
  it('are already applied to the template, and a second run applies nothing', async () => {
    const migrations = await readMigrations();
    expect(migrations.map((m) => m.name)).toContain('0001_init.sql');
    expect(await migrate(t.db, migrations)).toEqual([]);
  });

  it('serialise runs from several processes at once: each migration is applied exactly once', async () => {
    await t.db.query('drop schema sluice cascade');
    const migrations = await readMigrations();
    const results = await Promise.all([1, 2, 3, 4].map(() => migrate(t.db, migrations)));
    expect(results.flat().sort()).toEqual(migrations.map((m) => m.name).sort());
    const rows = await t.db.query<{ n: string }>('select count(*)::int as n from sluice.migrations');
    expect(rows[0]?.n).toBe(migrations.length);
  });

  it('refuse to run over a migration that was edited after it was applied', async () => {
    const [first, ...rest] = await readMigrations();
    const edited = { name: first!.name, sql: `${first!.sql}\n-- edited` };
    await expect(migrate(t.db, [edited, ...rest])).rejects.toThrow(/was changed after it was applied/);
  });
});
