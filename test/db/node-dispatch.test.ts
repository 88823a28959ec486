/**
 * Due-time dispatch on the Node server (docs/DESIGN.md §6), over real HTTP and a real Postgres:
 * retries, delays, Retry-After deferrals and abandoned leases are pushed when they come due,
 * with no poll to help (the fallback sleep is an hour); instances learn of each other's work
 * through LISTEN/NOTIFY; shutting down drains pushes in flight. The gaps are printed, not
 * asserted: speed belongs to the benchmark (`npm run bench:dispatch`).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, emptyTables, type TestDatabase } from '../helpers/db.ts';
import { startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';

const NO_POLL = 3_600_000;

let t: TestDatabase;
let endpoint: TestEndpoint;
let secrets: TestSecrets;
let env: Record<string, string>;
let sluice: NodeSluice;

beforeAll(async () => {
  [t, endpoint, secrets] = await Promise.all([createTestDatabase(), startEndpoint(), makeSecrets()]);
  env = testEnv(secrets, t.url, { SLUICE_QUEUES: JSON.stringify({ single: { concurrency: 1 } }) });
  sluice = await startNodeSluice({ env, maxSleepMs: NO_POLL });
});
afterAll(async () => {
  await sluice?.close();
  await endpoint?.close();
  await t?.drop();
});
beforeEach(async () => {
  await emptyTables(t.db, 'sluice.tasks, sluice.lanes');
  endpoint.received.length = 0;
  endpoint.reply(() => ({ status: 200 }));
});

async function enqueue(base: string, task: Record<string, unknown>): Promise<{ id: string; run_at: string }> {
  const res = await fetch(`${base}/v1/tasks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url: `${endpoint.url}/work`, ...task }),
  });
  expect(res.status).toBe(201);
  return (await res.json()) as { id: string; run_at: string };
}
const getTask = async (base: string, id: string) =>
  (await (await fetch(`${base}/v1/tasks/${id}`, { headers: { authorization: `Bearer ${secrets.apiKey}` } })).json()) as Record<
    string,
    unknown
  >;
const gap = (pushes: { receivedAt: number }[]) => pushes[1]!.receivedAt - pushes[0]!.receivedAt;

describe('the Node loop wakes when work comes due, without a poll', () => {
  it('pushes a retry once its backoff has passed', async () => {
    endpoint.reply((push) => ({ status: endpoint.received.indexOf(push) === 0 ? 500 : 200 }));
    const { id } = await enqueue(sluice.url, { max_attempts: 3, backoff: { initial_ms: 200, max_ms: 200, factor: 1, jitter: 0 } });
    const pushes = await endpoint.waitFor(2);
    expect(gap(pushes)).toBeGreaterThanOrEqual(200);
    console.info(`node: retry after a 200 ms backoff pushed ${gap(pushes)} ms after the first push`);
    expect(pushes[1]!.headers['sluice-attempt']).toBe('2');
    await expect.poll(async () => (await getTask(sluice.url, id)).status).toBe('succeeded');
  });

  it('pushes a delayed task when it is due, not before', async () => {
    const { run_at } = await enqueue(sluice.url, { delay_ms: 1_000 });
    const [push] = await endpoint.waitFor(1);
    const late = push!.receivedAt - Date.parse(run_at);
    expect(late).toBeGreaterThanOrEqual(0);
    console.info(`node: a task delayed 1 s pushed ${late} ms after it was due`);
  });

  it('pushes a 429 with Retry-After again after that long, using no attempt', async () => {
    endpoint.reply((push) => (endpoint.received.indexOf(push) === 0 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 200 }));
    const { id } = await enqueue(sluice.url, {});
    const pushes = await endpoint.waitFor(2);
    expect(gap(pushes)).toBeGreaterThanOrEqual(1_000);
    console.info(`node: a 429 with Retry-After: 1 pushed again ${gap(pushes)} ms later`);
    expect(pushes.map((p) => p.headers['sluice-attempt'])).toEqual(['1', '1']);
    await expect.poll(async () => (await getTask(sluice.url, id)).status).toBe('succeeded');
  });

  it('pushes a task whose holder went silent again once its lease expires', async () => {
    endpoint.reply((push) =>
      endpoint.received.indexOf(push) === 0 ? { status: 202, headers: { 'Sluice-Ack': 'lease' } } : { status: 200 },
    );
    await enqueue(sluice.url, { lease_ms: 1_000, timeout_ms: 500 });
    const pushes = await endpoint.waitFor(2);
    const expiry = Date.parse(pushes[0]!.headers['sluice-lease-expires-at'] as string);
    expect(pushes[1]!.receivedAt).toBeGreaterThanOrEqual(expiry);
    console.info(`node: an abandoned 1 s lease pushed again ${gap(pushes)} ms after the first push`);
  });
});

describe('several instances on one database', () => {
  it('an instance serving only the API wakes the dispatching one through NOTIFY: enqueues, delays and lease ends', async () => {
    const api = await startNodeSluice({ env, dispatch: false });
    try {
      // An instance that dispatches nothing itself: the push must come from `sluice`.
      await enqueue(api.url, { body: 'now' });
      await endpoint.waitFor(1);
      const { run_at } = await enqueue(api.url, { body: 'later', delay_ms: 700 });
      const pushes = await endpoint.waitFor(2);
      expect(pushes[1]!.receivedAt).toBeGreaterThanOrEqual(Date.parse(run_at));

      // Concurrency 1: the second task waits for the first's lease, which ends through the
      // other instance's lease API.
      endpoint.reply((push) => (push.text === '"held"' ? { status: 202, headers: { 'Sluice-Ack': 'lease' } } : { status: 200 }));
      await enqueue(api.url, { queue: 'single', body: 'held', lease_ms: 600_000 });
      const [, , held] = await endpoint.waitFor(3);
      await enqueue(api.url, { queue: 'single', body: 'next' });
      await new Promise((r) => setTimeout(r, 200));
      expect(endpoint.received).toHaveLength(3);
      const completing = Date.now();
      const res = await fetch(`${api.url}/v1/leases/${held!.headers['sluice-lease-id']}/complete`, {
        method: 'POST',
        headers: { authorization: `Bearer ${held!.headers['sluice-lease-token']}`, 'content-type': 'application/json' },
        body: '{}',
      });
      expect(res.status).toBe(200);
      const [, , , next] = await endpoint.waitFor(4);
      expect(next!.text).toBe('"next"');
      console.info(`node: slot handed on across instances ${next!.receivedAt - completing} ms after the complete call was sent`);
    } finally {
      await api.close();
    }
  });
});

describe('shutting down', () => {
  it('stops claiming, lets the push in flight finish and settle, then closes', async () => {
    // Only `own` dispatches in this test.
    await sluice.close();
    const own = await startNodeSluice({ env, maxSleepMs: NO_POLL });
    endpoint.reply(() => ({ status: 200, delayMs: 400 }));
    const first = await enqueue(own.url, { queue: 'single' });
    const second = await enqueue(own.url, { queue: 'single' });
    await endpoint.waitFor(1);
    await own.close();
    expect(endpoint.received).toHaveLength(1);
    const statuses = await t.db.query<{ id: string; status: string }>('select id::text, status from sluice.all_tasks t order by t.id');
    expect(statuses).toEqual([
      { id: first.id, status: 'succeeded' },
      { id: second.id, status: 'pending' },
    ]);
  });
});
