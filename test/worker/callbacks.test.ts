/**
 * Callbacks (migrations/0019_callbacks.sql, functions/callbacks.sql), through the real Worker in
 * workerd and the Node server: a task that succeeds or goes dead is told to its callback URL by
 * a signed push, itself a task of the queue `callbacks`, retried when its endpoint fails, once
 * per finished task, and never called back itself.
 */
import { createLocalJWKSet, type JSONWebKeySet } from 'jose';
import { describe, expect, it } from 'vitest';
import { verifyPush } from '../../src/protocol/signature.ts';
import type { TestDatabase } from '../helpers/db.ts';
import type { ReceivedPush } from '../helpers/endpoint.ts';
import { apiCall, useNodeBeside, useWorkerFixture } from '../helpers/worker-fixture.ts';

// The callbacks' own queue retries fast here; a task's settings are its own.
const QUEUES = JSON.stringify({ callbacks: { backoff: { initial_ms: 100, max_ms: 100, factor: 1, jitter: 0 } } });
const f = useWorkerFixture(() => ({ SLUICE_QUEUES: QUEUES }));

const call = (base: string, method: string, path: string, body?: unknown) => apiCall(base, f.secrets.apiKey, method, path, body);

async function pushesTo(path: string, n: number): Promise<ReceivedPush[]> {
  await expect.poll(() => f.endpoint.received.filter((p) => p.path === path).length, { timeout: 20_000, interval: 50 }).toBe(n);
  return f.endpoint.received.filter((p) => p.path === path);
}

async function exercise(base: string, db: TestDatabase['db'], name: string) {
  const at = (path: string) => `${f.endpoint.url}/${name}/${path}`;
  const keys = createLocalJWKSet((await (await fetch(`${base}/.well-known/jwks.json`)).json()) as JSONWebKeySet);
  let callbackFailures = 0;
  f.endpoint.reply((push) => {
    if (push.path === `/${name}/work`) return { status: 200, body: 'done' };
    if (push.path === `/${name}/broken`) return { status: 500, body: 'broken' };
    if (push.path === `/${name}/long`) return { status: 202, headers: { 'sluice-ack': 'lease' } };
    // The first callback push fails: it is retried as any task is.
    if (push.path === `/${name}/told` && callbackFailures++ === 0) return { status: 503 };
    return { status: 200 };
  });

  const ok = await call(base, 'POST', '/v1/tasks', { url: at('work'), callback_url: at('told'), failure_callback_url: at('mourned') });
  expect(ok.status).toBe(201);
  expect(ok.body).toMatchObject({ callback_url: at('told'), failure_callback_url: at('mourned') });
  const dead = await call(base, 'POST', '/v1/tasks', { url: at('broken'), max_attempts: 1, failure_callback_url: at('mourned') });
  expect(dead.status).toBe(201);

  // Told once the callback's retry went through: signed, with what the endpoint answered.
  const told = await pushesTo(`/${name}/told`, 2);
  expect(told.map((p) => p.headers['sluice-attempt'])).toEqual(['1', '2']);
  expect(told[0]!.headers['sluice-task-id']).toBe(told[1]!.headers['sluice-task-id']);
  const claims = await verifyPush({
    token: String(told[1]!.headers['sluice-signature']),
    keys,
    url: told[1]!.url,
    body: told[1]!.body,
    nowMs: Date.now(),
  });
  expect(claims.sub).toBe(told[1]!.headers['sluice-task-id']);
  expect(JSON.parse(told[1]!.text)).toMatchObject({
    task_id: ok.body.id,
    queue: 'default',
    status: 'succeeded',
    attempts: 1,
    http_status: 200,
    result: 'done',
    error: null,
  });

  // A task gone dead is told to its failure URL, with its last error.
  const [mourned] = await pushesTo(`/${name}/mourned`, 1);
  expect(JSON.parse(mourned!.text)).toMatchObject({ task_id: dead.body.id, status: 'dead', http_status: 500, attempts: 1 });
  expect(JSON.parse(mourned!.text).error).toContain('500');
  // Times as the API writes them.
  expect(JSON.parse(mourned!.text).finished_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

  // Once per finished task, in the queue `callbacks`, and a callback has none of its own. The
  // endpoint has the push before the dispatcher has its answer: the callback settles just after.
  const callbackTask = () => call(base, 'GET', `/v1/tasks/${told[1]!.headers['sluice-task-id']}`);
  await expect.poll(async () => (await callbackTask()).body.status, { timeout: 10_000, interval: 50 }).toBe('succeeded');
  expect((await callbackTask()).body).toMatchObject({ queue: 'callbacks', callback_url: null, failure_callback_url: null });
  const rows = await db.query<{ n: number }>(`select count(*)::int as n from sluice.all_tasks where queue = 'callbacks'`);
  expect(rows[0]!.n).toBe(2);

  // A task finished by its lease's `complete` is told too, with the result the call gave.
  const long = await call(base, 'POST', '/v1/tasks', { url: at('long'), callback_url: at('long-told') });
  const [leased] = await pushesTo(`/${name}/long`, 1);
  const completed = await fetch(`${base}/v1/leases/${leased!.headers['sluice-lease-id']}/complete`, {
    method: 'POST',
    headers: { authorization: `Bearer ${leased!.headers['sluice-lease-token']}`, 'content-type': 'application/json' },
    body: JSON.stringify({ result: { rendered: 3 } }),
  });
  expect(completed.status).toBe(200);
  const [longTold] = await pushesTo(`/${name}/long-told`, 1);
  const told2 = JSON.parse(longTold!.text) as { task_id: string; status: string; result: string };
  expect([told2.task_id, told2.status, JSON.parse(told2.result)]).toEqual([long.body.id, 'succeeded', { rendered: 3 }]);
  // Still once each, now that more has gone by: no callback was told twice, none called back.
  expect(f.endpoint.received.filter((p) => p.path === `/${name}/mourned`)).toHaveLength(1);
  const after = await db.query<{ n: number }>(`select count(*)::int as n from sluice.all_tasks where queue = 'callbacks'`);
  expect(after[0]!.n).toBe(3);

  // A dead task redriven keeps whom to tell: dead again, it is told again.
  const redriven = await call(base, 'POST', `/v1/tasks/${dead.body.id}/retry`);
  expect(redriven.status).toBe(200);
  expect(redriven.body).toMatchObject({ status: 'pending', failure_callback_url: at('mourned') });
  const mournedAgain = await pushesTo(`/${name}/mourned`, 2);
  expect(JSON.parse(mournedAgain[1]!.text)).toMatchObject({ task_id: dead.body.id, status: 'dead' });

  // A callback URL is checked as a task's own is.
  const refused = await call(base, 'POST', '/v1/tasks', { url: at('work'), callback_url: 'ftp://example.com/x' });
  expect(refused.status).toBe(400);
  expect((refused.body.issues as Array<{ path: string }>).map((i) => i.path)).toEqual(['callback_url']);
}

describe('callbacks', () => {
  it('on the Worker', async () => {
    await exercise(f.worker.url, f.t.db, 'worker');
  }, 60_000);

  describe('on the Node server', () => {
    const side = useNodeBeside(f, { SLUICE_QUEUES: QUEUES });
    it('does the same', async () => {
      await exercise(side.node.url, side.t.db, 'node');
    }, 60_000);
  });
});
