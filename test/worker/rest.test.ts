/**
 * A deployment at rest (core/rest.ts) sends Postgres nothing, on the real Worker in workerd and
 * on the Node server: once SLUICE_REST_AFTER_MS has passed without work and nothing is due, the
 * cron's minutes (Worker) and the fallback poll and chores (Node) send no statement and open no
 * connection, read on Postgres's side (test/helpers/db-activity.ts). Right after work the same
 * cron and poll do query, so the reading can fail; and the next enqueue is pushed as ever.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { testEnv } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { databaseActivity } from '../helpers/db-activity.ts';
import { apiCall, useWorkerFixture } from '../helpers/worker-fixture.ts';

const REST_AFTER_MS = 1_000;
const VARS = { SLUICE_REST_AFTER_MS: String(REST_AFTER_MS) };
const f = useWorkerFixture(() => VARS);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Path {
  base: string;
  t: TestDatabase;
  /** What the path does on a minute of its own: the Worker's cron, or the Node server's poll and chores (they run by themselves). */
  minute(): Promise<void>;
}

async function pushOne(path: Path, n: number): Promise<void> {
  const enqueued = await apiCall(path.base, f.secrets.apiKey, 'POST', '/v1/tasks', { url: `${f.endpoint.url}/rest`, body: { n } });
  expect(enqueued.status).toBe(201);
  await expect
    .poll(async () => (await apiCall(path.base, f.secrets.apiKey, 'GET', `/v1/tasks/${enqueued.body.id}`)).body.status, {
      timeout: 15_000,
      interval: 50,
    })
    .toBe('succeeded');
}

async function exercise(path: Path) {
  const probe = await databaseActivity(path.t.url);
  try {
    await pushOne(path, 1);
    // Within SLUICE_REST_AFTER_MS of that work, a minute's chores query Postgres.
    const awake = await probe.read();
    await path.minute();
    expect((await probe.read()).statements).toBeGreaterThan(awake.statements);

    // Past it, with nothing due: three minutes' worth of cron (or polls) send nothing.
    await sleep(REST_AFTER_MS + 500);
    const resting = await probe.read();
    for (let i = 0; i < 3; i++) await path.minute();
    const after = await probe.read();
    expect(after.statements).toBe(resting.statements);
    expect(after.sessions.filter((pid) => !resting.sessions.includes(pid))).toEqual([]);
    console.info(`at rest on ${path.base}: 0 statements, 0 new sessions over three minutes' chores (${resting.statements} before)`);

    // The next enqueue ends the rest: pushed as ever.
    await pushOne(path, 2);
  } finally {
    await probe.close();
  }
}

describe('a deployment at rest', () => {
  it('on the Worker: the cron sends Postgres nothing', async () => {
    await exercise({ base: f.worker.url, t: f.t, minute: () => f.worker.scheduled() });
  }, 60_000);

  describe('on the Node server', () => {
    let t: TestDatabase;
    let node: NodeSluice;
    beforeAll(async () => {
      t = await createTestDatabase();
      // A fallback poll five times a second: without rest it would query all the time.
      node = await startNodeSluice({ env: testEnv(f.secrets, t.url, VARS), maxSleepMs: 200 });
    });
    afterAll(async () => {
      await node?.close();
      await t?.drop();
    });

    it('its poll and chores send Postgres nothing', async () => {
      await exercise({ base: node.url, t, minute: async () => void (await sleep(1_100)) });
    }, 60_000);
  });
});
