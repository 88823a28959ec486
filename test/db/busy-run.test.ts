/**
 * Work that comes due while a dispatcher run waits on slow pushes is not left for the next run:
 * a rate limit's room, and a schedule's slots (the real loop and run, a real Postgres, real HTTP).
 * On the old run, both waited for the slow push to end (a review measured 0.4/s for a rate of
 * 2/s, and schedule slots counted as missed while Sluice was up).
 */
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { nextSlot, parseCron } from '../../src/core/schedule.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { scheduleGet, scheduleInsert, toTemplate } from '../../src/db/schedules.ts';
import { DispatchLoop } from '../../src/dispatcher/loop.ts';
import { dispatchRun } from '../../src/dispatcher/run.ts';
import { loadKeyring } from '../../src/security/keyring.ts';
import { testConfig } from '../helpers/config.ts';
import { createTestDatabase, emptyTables, type TestDatabase } from '../helpers/db.ts';
import { startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';
import { newTask } from '../helpers/tasks.ts';

let t: TestDatabase;
let endpoint: TestEndpoint;
beforeAll(async () => {
  [t, endpoint] = await Promise.all([createTestDatabase(), startEndpoint()]);
});
afterAll(async () => {
  await endpoint?.close();
  await t?.drop();
});
beforeEach(async () => {
  await emptyTables(t.db, 'sluice.tasks, sluice.lanes, sluice.schedules, sluice.rate_grants');
  endpoint.received.length = 0;
});

async function withLoop<T>(env: Record<string, string>, body: () => Promise<T>): Promise<T> {
  const { config } = await testConfig(t.url, env);
  const keyring = await loadKeyring(config.signingKeys);
  const loop = new DispatchLoop((signal, nudges) => dispatchRun({ db: t.db, config, keyring }, { budgetMs: 30_000, signal, nudges }), {
    maxSleepMs: 3_600_000,
  });
  loop.start();
  try {
    return await body();
  } finally {
    await loop.stop();
  }
}

it('claims within a rate as its room comes, while earlier pushes are still running', async () => {
  endpoint.reply(() => ({ status: 200, delayMs: 2_500 }));
  await taskInsertMany(
    t.db,
    Array.from({ length: 6 }, (_, i) => newTask({ queue: 'paced', url: `${endpoint.url}/slow`, body: `${i}`, timeoutMs: 20_000 })),
  );
  await withLoop({ SLUICE_QUEUES: JSON.stringify({ paced: { rate: { limit: 2, period_ms: 500 } } }) }, async () => {
    // Every push has started (on the old run, the last two waited for the first to answer).
    await endpoint.waitFor(6, 15_000);
  });
  const [span] = await t.db.query<{ ms: number }>(
    `select (extract(epoch from max(started_at) - min(started_at)) * 1000)::float8 as ms from sluice.all_attempts`,
  );
  // Three windows of 500 ms: the last two claims 1 s after the first, not after a 2.5 s push.
  expect(span!.ms).toBeGreaterThanOrEqual(1_000);
  expect(span!.ms).toBeLessThan(2_500);
  console.info(`busy run: 6 claims at 2 per 500 ms under 2.5 s pushes spanned ${Math.round(span!.ms)} ms`);
});

it("fires a schedule's slots while the run waits on a slow push, missing none", async () => {
  endpoint.reply((p) => (p.path === '/slow' ? { status: 200, delayMs: 4_000 } : { status: 200 }));
  await taskInsertMany(t.db, [newTask({ url: `${endpoint.url}/slow`, timeoutMs: 20_000 })]);
  const parsed = parseCron('* * * * * *', 'UTC');
  if (!('cron' in parsed)) throw new Error(parsed.problem);
  await scheduleInsert(t.db, {
    name: 'tick',
    cron: '* * * * * *',
    timezone: 'UTC',
    overlap: 'allow',
    template: toTemplate(newTask({ url: `${endpoint.url}/tick` })),
    nextFireAt: nextSlot(parsed.cron, new Date()),
  });
  const schedule = await withLoop({}, async () => {
    // Until the slow push has been answered.
    const slowDone = `select 1 from sluice.all_attempts a join sluice.all_tasks t on t.id = a.task_id where t.url like '%/slow'`;
    await expect.poll(async () => (await t.db.query(slowDone)).length, { timeout: 15_000 }).toBe(1);
    return scheduleGet(t.db, 'tick');
  });
  expect(schedule!.missed).toBe(0);
  expect(schedule!.fired).toBeGreaterThanOrEqual(2);
  console.info(`busy run: during a 4 s push a per-second schedule fired ${schedule!.fired}, missed ${schedule!.missed}`);
});
