/**
 * Endpoint health (migrations/0027_endpoints.sql) on the real Worker in workerd and on the Node
 * server: an origin that fails SLUICE_ENDPOINT_PAUSE_AFTER times in a row is paused, its tasks
 * wait using no attempt, and another origin is pushed meanwhile; GET /v1/endpoints shows it, a
 * resume by hand lets its tasks go; a Retry-After holds its origin (and its key), not the queue.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SluiceClient } from '../../src/sdk/client.ts';
import { generateApiKey } from '../../src/security/api-keys.ts';
import type { TestDatabase } from '../helpers/db.ts';
import { startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';
import { apiCall, useNodeBeside, useWorkerFixture, type WorkerFixture } from '../helpers/worker-fixture.ts';

const admin = await generateApiKey('ops', ['admin', 'tasks:read']);
const vars = (f: WorkerFixture) => ({
  SLUICE_ENDPOINT_PAUSE_AFTER: '3',
  SLUICE_API_KEYS: JSON.stringify([...JSON.parse(f.secrets.apiKeysJson), admin.entry]),
});
const f = useWorkerFixture(vars);
/** A second origin: the same host, another port. */
let other: TestEndpoint;
beforeAll(async () => {
  other = await startEndpoint();
});
afterAll(async () => {
  await other?.close();
});

interface Endpoint {
  origin: string;
  state: string;
  consecutive_failures: number;
  attempts_5m: number;
  failures_5m: number;
  last_error: string | null;
  paused_until: string | null;
  paused_by: string | null;
  held_until: string | null;
}

const statusOf = async (db: TestDatabase['db'], queue: string) =>
  db.query<{ status: string; attempts: number; n: number }>(
    `select status, attempts, count(*)::int as n from sluice.all_tasks where queue = $1 group by 1, 2 order by 1, 2`,
    [queue],
  );

async function pauseAndResume(base: string, db: TestDatabase['db']) {
  const key = f.secrets.apiKey;
  const a = new URL(f.endpoint.url).origin;
  const b = new URL(other.url).origin;
  f.endpoint.reply(() => ({ status: 502, body: 'bad gateway' }));
  other.reply(() => ({ status: 200 }));
  const task = (url: string) => ({ queue: 'health', url, max_attempts: 20, backoff: { initial_ms: 50, max_ms: 50, jitter: 0 } });
  const batch = await apiCall(base, key, 'POST', '/v1/tasks/batch', {
    tasks: [task(`${f.endpoint.url}/a/1`), task(`${f.endpoint.url}/a/2`)],
  });
  expect(batch.status).toBe(201);
  const listed = async () => ((await apiCall(base, key, 'GET', '/v1/endpoints')).body.endpoints as Endpoint[]).find((e) => e.origin === a);
  await expect.poll(async () => (await listed())?.state, { timeout: 15_000, interval: 100 }).toBe('paused');
  const paused = (await listed())!;
  expect(paused).toMatchObject({ paused_by: 'failures', last_error: 'HTTP 502: bad gateway' });
  expect(paused.consecutive_failures).toBeGreaterThanOrEqual(3);
  expect(paused.failures_5m).toBeGreaterThanOrEqual(3);
  expect(Date.parse(paused.paused_until!)).toBeGreaterThan(Date.now());

  // Paused: another origin's task is pushed; A's tasks wait, and their attempts stay where they were.
  const pushesToA = f.endpoint.received.filter((p) => p.path.startsWith('/a/')).length;
  const onB = await apiCall(base, key, 'POST', '/v1/tasks', task(`${other.url}/b`));
  await expect
    .poll(async () => (await apiCall(base, key, 'GET', `/v1/tasks/${onB.body.id}`)).body.status, { timeout: 10_000 })
    .toBe('succeeded');
  const waiting = await statusOf(db, 'health');
  expect(waiting.filter((r) => r.status === 'pending').reduce((n, r) => n + r.n, 0)).toBe(2);
  const attemptsBefore = waiting.map((r) => r.attempts);
  expect(f.endpoint.received.filter((p) => p.path.startsWith('/a/')).length).toBeLessThanOrEqual(pushesToA + 1);

  // A answers again; a resume by hand (admin only) sends its tasks at once, without waiting for the probe.
  f.endpoint.reply(() => ({ status: 200 }));
  expect((await apiCall(base, key, 'POST', `/v1/endpoints/${encodeURIComponent(a)}/resume`)).status).toBe(403);
  const resumed = await apiCall(base, admin.key, 'POST', `/v1/endpoints/${encodeURIComponent(a)}/resume`);
  expect(resumed.status).toBe(200);
  expect(resumed.body).toMatchObject({ origin: a, state: 'healthy', consecutive_failures: 0, paused_until: null });
  await expect
    .poll(async () => (await statusOf(db, 'health')).filter((r) => r.status === 'succeeded').reduce((n, r) => n + r.n, 0), {
      timeout: 10_000,
    })
    .toBe(3);
  // The waits used no attempt: each task used one more than it had when A was paused.
  const after = await statusOf(db, 'health');
  expect(Math.max(...after.map((r) => r.attempts))).toBeLessThanOrEqual(Math.max(...attemptsBefore) + 1);

  // By hand: a pause holds A with no probe; bad origins and unknown ones are refused.
  const hand = await apiCall(base, admin.key, 'POST', `/v1/endpoints/${encodeURIComponent(a)}/pause`);
  expect(hand.body).toMatchObject({ origin: a, state: 'paused', paused_by: 'hand', paused_until: null });
  for (const bad of ['ftp%3A%2F%2Fx', encodeURIComponent(`${a}/path`), 'nope']) {
    const refused = await apiCall(base, admin.key, 'POST', `/v1/endpoints/${bad}/pause`);
    expect(refused.status, bad).toBe(400);
    expect(refused.body.issues).toEqual([{ path: 'origin', message: expect.stringMatching(/^must be an http\(s\) origin/) }]);
  }
  expect((await apiCall(base, admin.key, 'POST', `/v1/endpoints/${encodeURIComponent('https://unknown.example')}/resume`)).status).toBe(
    404,
  );
  expect((await apiCall(base, admin.key, 'POST', `/v1/endpoints/${encodeURIComponent(b)}/pause`)).status).toBe(200);
  for (const origin of [a, b]) {
    expect((await apiCall(base, admin.key, 'POST', `/v1/endpoints/${encodeURIComponent(origin)}/resume`)).status).toBe(200);
  }
  // The SDK's client makes the same calls.
  const sdk = new SluiceClient({ baseUrl: base, apiKey: admin.key });
  expect(await sdk.endpoints.pause(b)).toMatchObject({ origin: b, state: 'paused', paused_by: 'hand' });
  expect((await sdk.endpoints.list()).find((e) => e.origin === b)).toMatchObject({ state: 'paused', paused_until: null });
  expect(await sdk.endpoints.resume(b)).toMatchObject({ origin: b, state: 'healthy' });
}

/** `endpoint` answers the first push to `path` 429 with `Retry-After: seconds` (1), and every other push 200. */
function retryAfterOnce(endpoint: TestEndpoint, path: string, seconds = 1): void {
  let first = true;
  endpoint.reply((push) => {
    if (push.path === path && first) {
      first = false;
      return { status: 429, headers: { 'retry-after': String(seconds) } };
    }
    return { status: 200 };
  });
}

/**
 * The README's case: a retry due 0.2 s after its first push, to one origin, while a 429
 * Retry-After from another holds that other origin: pushed on time, not when the hold ends. The
 * hold is long (30 s), so that "before it ended" says where the retry waited however slow the
 * machine; a resume by hand then ends it.
 */
async function holdsTheOrigin(base: string) {
  const key = f.secrets.apiKey;
  const HOLD_S = 30;
  retryAfterOnce(f.endpoint, '/ra', HOLD_S);
  let firstB = true;
  other.reply((push) => {
    if (push.path === '/fail' && firstB) {
      firstB = false;
      return { status: 500 };
    }
    return { status: 200 };
  });
  const since = Date.now();
  const held = await apiCall(base, key, 'POST', '/v1/tasks', { queue: 'hold', url: `${f.endpoint.url}/ra` });
  expect(held.status).toBe(201);
  await expect.poll(() => f.endpoint.received.filter((p) => p.path === '/ra' && p.receivedAt >= since).length, { timeout: 10_000 }).toBe(1);
  const retried = await apiCall(base, key, 'POST', '/v1/tasks', {
    queue: 'hold',
    url: `${other.url}/fail`,
    backoff: { initial_ms: 200, jitter: 0 },
  });
  expect(retried.status).toBe(201);
  await expect.poll(() => other.received.filter((p) => p.path === '/fail' && p.receivedAt >= since).length, { timeout: 10_000 }).toBe(2);
  const [first, second] = other.received.filter((p) => p.path === '/fail' && p.receivedAt >= since);
  const [ra] = f.endpoint.received.filter((p) => p.path === '/ra' && p.receivedAt >= since);
  const gap = second!.receivedAt - first!.receivedAt;
  console.info(
    `${base}: a retry due 200 ms later pushed ${gap} ms after its first push, while another origin was held by Retry-After: ${HOLD_S}`,
  );
  // Long before the hold on the other origin ends; and after its own backoff.
  expect(second!.receivedAt).toBeLessThan(ra!.receivedAt + (HOLD_S * 1_000) / 2);
  expect(gap).toBeGreaterThanOrEqual(150);
  // The held origin's task waits for its hold; a resume by hand ends the origin's hold (the
  // task itself keeps the Retry-After its 429 gave it), and it is cancelled so no later test sees it.
  expect(f.endpoint.received.filter((p) => p.path === '/ra' && p.receivedAt >= since)).toHaveLength(1);
  const origin = new URL(f.endpoint.url).origin;
  const list = async () => (await apiCall(base, admin.key, 'GET', '/v1/endpoints')).body.endpoints as Array<{ origin: string }>;
  expect((await apiCall(base, admin.key, 'POST', `/v1/endpoints/${encodeURIComponent(origin)}/resume`)).status).toBe(200);
  expect((await list()).find((e) => e.origin === origin)).toMatchObject({ state: 'healthy', held_until: null });
  expect((await apiCall(base, admin.key, 'POST', `/v1/tasks/${held.body.id}/cancel`)).status).toBe(200);
}

/**
 * A keyed task's Retry-After holds its origin and its key, and nothing else: another key to that
 * origin waits, the key's task to another origin waits, another key to another origin goes.
 */
async function holdsTheKeyAndTheOrigin(base: string, db: TestDatabase['db']) {
  const key = f.secrets.apiKey;
  retryAfterOnce(f.endpoint, '/key-a');
  other.reply(() => ({ status: 200 }));
  const task = (url: string, concurrency_key: string) => ({ queue: 'keyhold', url, concurrency_key });
  expect((await apiCall(base, key, 'POST', '/v1/tasks', task(`${f.endpoint.url}/key-a`, 'a'))).status).toBe(201);
  const origin = new URL(f.endpoint.url).origin;
  // The hold this push makes (an earlier test's may still be on the row, ended).
  const heldUntil = async () =>
    (
      await db.query<{ until: Date }>('select held_until as until from sluice.endpoints where origin = $1 and held_until > now()', [origin])
    )[0]?.until;
  await expect.poll(heldUntil, { timeout: 10_000 }).toBeTruthy();
  const holdEnd = (await heldUntil())!.getTime();
  const [keyHold] = await db.query<{ until: Date }>(
    `select held_until as until from sluice.levels where queue = 'keyhold' and lane = 'k:a'`,
  );
  expect(keyHold?.until.getTime()).toBe(holdEnd);
  const batch = await apiCall(base, key, 'POST', '/v1/tasks/batch', {
    tasks: [task(`${f.endpoint.url}/key-b`, 'b'), task(`${other.url}/key-a`, 'a'), task(`${other.url}/key-b`, 'b')],
  });
  expect(batch.status).toBe(201);
  await expect.poll(async () => (await statusOf(db, 'keyhold')).find((r) => r.status === 'succeeded')?.n, { timeout: 15_000 }).toBe(4);
  // On the database's clock, as the holds were set: when each task's last push began.
  const starts = await db.query<{ url: string; at: Date }>(
    `select t.url, max(a.started_at) as at from sluice.all_attempts a join sluice.all_tasks t on t.id = a.task_id
     where t.queue = 'keyhold' group by t.url`,
  );
  const startOf = (url: string) => starts.find((s) => s.url === url)!.at.getTime() - holdEnd;
  const [sameOrigin, sameKey, neither] = [`${f.endpoint.url}/key-b`, `${other.url}/key-a`, `${other.url}/key-b`].map(startOf);
  console.info(
    `${base}: after the hold ended, key b to its origin pushed at ${sameOrigin} ms, key a elsewhere at ${sameKey} ms; key b elsewhere at ${neither} ms`,
  );
  expect(sameOrigin).toBeGreaterThanOrEqual(0);
  expect(sameKey).toBeGreaterThanOrEqual(0);
  expect(neither).toBeLessThan(0);
}

describe('endpoint health', () => {
  it('on the Worker: pauses an origin that fails, resumes it by hand', async () => {
    await pauseAndResume(f.worker.url, f.t.db);
  });
  it('on the Worker: a Retry-After holds its origin, not the queue', async () => {
    await holdsTheOrigin(f.worker.url);
  });
  it('on the Worker: a keyed Retry-After holds its key and its origin, and no other key elsewhere', async () => {
    await holdsTheKeyAndTheOrigin(f.worker.url, f.t.db);
  });

  describe('on the Node server', () => {
    const side = useNodeBeside(f, vars);
    it('pauses an origin that fails, resumes it by hand', async () => {
      await pauseAndResume(side.node.url, side.t.db);
    });
    it('a Retry-After holds its origin, not the queue', async () => {
      await holdsTheOrigin(side.node.url);
    });
    it('a keyed Retry-After holds its key and its origin, and no other key elsewhere', async () => {
      await holdsTheKeyAndTheOrigin(side.node.url, side.t.db);
    });
  });
});
