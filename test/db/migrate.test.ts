import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.ts';
import { readFunctions, readMigrations } from '../../src/node/migrations.ts';
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
    expect(await migrate(t.db, migrations, await readFunctions())).toEqual([]);
  });

  it('re-apply a function file whenever it changes, and only then', async () => {
    const migrations = await readMigrations();
    const [claim] = (await readFunctions()).filter((f) => f.name === 'claim.sql');
    const probe = { name: 'probe.sql', sql: `create or replace function sluice.probe() returns int language sql as $$ select 1 $$;` };
    expect(await migrate(t.db, migrations, [claim!, probe])).toEqual(['functions/probe.sql']);
    expect(await migrate(t.db, migrations, [claim!, probe])).toEqual([]);
    const changed = { name: 'probe.sql', sql: probe.sql.replace('select 1', 'select 2') };
    expect(await migrate(t.db, migrations, [claim!, changed])).toEqual(['functions/probe.sql']);
    expect(await t.db.query('select sluice.probe() as v')).toEqual([{ v: 2 }]);
    await t.db.query('drop function sluice.probe()');
    await t.db.query(`delete from sluice.functions where name = 'probe.sql'`);
  });

  it('serialise runs from several processes at once: each migration is applied exactly once', async () => {
    await t.db.query('drop schema sluice cascade');
    const migrations = await readMigrations();
    const functions = await readFunctions();
    const results = await Promise.all([1, 2, 3, 4].map(() => migrate(t.db, migrations, functions)));
    expect(results.flat().sort()).toEqual([...migrations.map((m) => m.name), ...functions.map((f) => `functions/${f.name}`)].sort());
    const rows = await t.db.query<{ n: string }>('select count(*)::int as n from sluice.migrations');
    expect(rows[0]?.n).toBe(migrations.length);
  });

  it('0015 names the lanes lanes, and keeps sluice.keys working for a server of the previous version', async () => {
    const u = await createTestDatabase({ empty: true });
    try {
      const migrations = await readMigrations();
      const before = migrations.filter((m) => m.name < '0015');
      await migrate(u.db, before);
      // Lanes as the previous version left them.
      await u.db.query(`insert into sluice.keys (queue, lane, head_priority) values ('q', '', 0), ('q', 'k:a', null)`);
      expect(await migrate(u.db, migrations, await readFunctions())).toEqual(
        expect.arrayContaining(['0015_lanes.sql', 'functions/claim.sql']),
      );
      const lanes = await u.db.query<{ lane: string }>('select lane from sluice.lanes order by lane');
      expect(lanes.map((l) => l.lane)).toEqual(['', 'k:a']);
      // The previous version's reads and hint updates, through the view.
      await u.db.query(`update sluice.keys set head_priority = 1 where lane = 'k:a'`);
      expect(await u.db.query(`select head_priority from sluice.lanes where lane = 'k:a'`)).toEqual([{ head_priority: 1 }]);
      // An enqueue makes its lane's row through the renamed trigger.
      await u.db.query(
        `insert into sluice.tasks (queue, url, concurrency_key, max_attempts, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, timeout_ms, lease_ms)
         values ('r', 'https://example.com/', 'b', 3, 1000, 60000, 2, 0.1, 1000, 2000)`,
      );
      expect(await u.db.query(`select queue, lane from sluice.keys where queue = 'r'`)).toEqual([{ queue: 'r', lane: 'k:b' }]);
      const names = await u.db.query<{ name: string }>(
        `select conname as name from pg_constraint where conrelid = 'sluice.lanes'::regclass
         union all select indexname from pg_indexes where schemaname = 'sluice' and tablename = 'lanes'`,
      );
      expect(names.filter((n) => n.name.startsWith('keys'))).toEqual([]);
    } finally {
      await u.drop();
    }
  });

  it('refuse to run over a migration that was edited after it was applied', async () => {
    const [first, ...rest] = await readMigrations();
    const edited = { name: first!.name, sql: `${first!.sql}\n-- edited` };
    await expect(migrate(t.db, [edited, ...rest])).rejects.toThrow(/was changed after it was applied/);
  });
});
