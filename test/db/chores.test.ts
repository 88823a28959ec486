/**
 * The one list of chores (src/dispatcher/chores.ts) against a real Postgres, on a clock the
 * test passes in: each chore runs when its interval has come, not before, and one that fails
 * is logged and runs again at its next turn, never thrown at the process that runs it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Config, loadConfig } from '../../src/config.ts';
import { CHORES, Chores, COUNT_INTERVAL_MS } from '../../src/dispatcher/chores.ts';
import { sweepIntervalMs } from '../../src/dispatcher/retention.ts';
import { openPgDb } from '../../src/node/pg-db.ts';
import { makeSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { type ActivityProbe, databaseActivity } from '../helpers/db-activity.ts';

let t: TestDatabase;
let config: Config;
let probe: ActivityProbe;
beforeAll(async () => {
  t = await createTestDatabase();
  config = loadConfig(testEnv(await makeSecrets(), t.url));
  probe = await databaseActivity(t.url);
});
afterAll(async () => {
  await probe?.close();
  await t?.drop();
});

const statements = async () => (await probe.read()).statements;

describe('Chores', () => {
  it('runs each chore when its interval has come, and not before', async () => {
    expect(CHORES.map((c) => c.name)).toEqual(['sweep', 'counts', 'endpoints']);
    expect(sweepIntervalMs(config)).toBeGreaterThan(COUNT_INTERVAL_MS);
    const chores = new Chores(config);
    const start = await statements();
    await chores.runDue(t.db, 0);
    const afterBoth = await statements();
    expect(afterBoth).toBeGreaterThan(start);
    await chores.runDue(t.db, COUNT_INTERVAL_MS - 1);
    expect(await statements()).toBe(afterBoth);
    // Counts come round first; the sweep at its own interval.
    await chores.runDue(t.db, COUNT_INTERVAL_MS);
    const afterCounts = await statements();
    expect(afterCounts).toBeGreaterThan(afterBoth);
    await chores.runDue(t.db, COUNT_INTERVAL_MS + 1);
    expect(await statements()).toBe(afterCounts);
    await chores.runDue(t.db, sweepIntervalMs(config), ['sweep']);
    expect(await statements()).toBeGreaterThan(afterCounts);
  });

  it('logs a chore that failed and runs it again at its next turn', async () => {
    const closed = openPgDb(t.url, 1);
    await closed.close();
    const errors: string[] = [];
    const chores = new Chores(config, { error: (message: string) => errors.push(message) });
    await chores.runDue(closed, 0, ['counts']);
    expect(errors).toEqual(['sluice: the counts chore failed']);
    await chores.runDue(closed, 1, ['counts']);
    expect(errors).toHaveLength(1);
    await chores.runDue(closed, COUNT_INTERVAL_MS, ['counts']);
    expect(errors).toHaveLength(2);
    // Its next turn runs on the connection open then: a Worker shard's closes between drains.
    const open = openPgDb(t.url, 1);
    await chores.runDue(open, 2 * COUNT_INTERVAL_MS, ['counts']);
    expect(errors).toHaveLength(2);
    await open.close();
  });
});
