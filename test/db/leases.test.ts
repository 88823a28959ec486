/**
 * Leases held past the push, over real HTTP both ways: Sluice (the Node server over real
 * Postgres) pushes to a local endpoint, which answers `Sluice-Ack: lease` and then calls the
 * lease API with the push's lease token.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, emptyTables, type TestDatabase } from '../helpers/db.ts';
import { type ReceivedPush, startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';

let t: TestDatabase;
let endpoint: TestEndpoint;
let sluice: NodeSluice;
let secrets: TestSecrets;

beforeAll(async () => {
  [t, endpoint, secrets] = await Promise.all([createTestDatabase(), startEndpoint(), makeSecrets()]);
  sluice = await startNodeSluice({
    env: testEnv(secrets, t.url, {
      SLUICE_LEASE_MS: '1500',
      SLUICE_PUSH_TIMEOUT_MS: '1000',
      SLUICE_MAX_LEASE_MS: '60000',
      SLUICE_QUEUES: JSON.stringify({ single: { concurrency: 1 } }),
    }),
  });
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

const KEEP = { status: 202, headers: { 'Sluice-Ack': 'lease' } };

async function api(path: string, body?: unknown, token = secrets.apiKey): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${sluice.url}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : {} };
}

const lease = (push: ReceivedPush) => ({
  id: push.headers['sluice-lease-id'] as string,
  token: push.headers['sluice-lease-token'] as string,
});
const call = (push: ReceivedPush, action: string, body: unknown = {}) =>
  api(`/v1/leases/${lease(push).id}/${action}`, body, lease(push).token);
const enqueue = async (extra: Record<string, unknown> = {}) =>
  (await api('/v1/tasks', { url: `${endpoint.url}/work`, ...extra })).json.id as string;
const task = async (id: string) => (await api(`/v1/tasks/${id}`)).json;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(probe: () => Promise<T | undefined>, timeoutMs = 8_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error('timed out waiting');
    await sleep(25);
  }
}

describe('a kept lease', () => {
  it('heartbeat extends it, complete finishes the task with its result; complete again is the same answer', async () => {
    endpoint.reply(() => KEEP);
    const id = await enqueue();
    const [push] = await endpoint.waitFor(1);
    expect(await task(id)).toMatchObject({ status: 'leased' });
    const before = Date.parse(push!.headers['sluice-lease-expires-at'] as string);
    await sleep(200);
    const beat = await call(push!, 'heartbeat', { extend_ms: 5_000 });
    expect(beat.status).toBe(200);
    expect(Date.parse(beat.json.expires_at as string)).toBeGreaterThan(before + 3_000);
    const done = await call(push!, 'complete', { result: { rows: 42 } });
    expect(done).toEqual({ status: 200, json: { task_id: id, status: 'succeeded' } });
    expect(await call(push!, 'complete', { result: 'other' })).toEqual({
      status: 200,
      json: { task_id: id, status: 'succeeded', repeated: true },
    });
    const final = await task(id);
    expect(final).toMatchObject({ status: 'succeeded', result: '{"rows":42}', attempts: 1, lease: null });
    // No HTTP answer ended it: a lease call has no status to record (the push's 202 kept the lease).
    expect(final.attempt_history).toEqual([
      expect.objectContaining({ attempt: 1, outcome: 'succeeded', lease_id: lease(push!).id, http_status: null }),
    ]);
    expect(final.last_status).toBeNull();
    expect((await call(push!, 'heartbeat')).json).toMatchObject({ code: 'lease_lost' });
  });

  it('a push kept with Sluice-Ack: lease tells its origin it is well when its handler completes', async () => {
    // The origin is paused after failures and its probe is due: the probe goes, and its handler
    // keeps the lease. The 2xx that kept it sends no statement; the complete says it, so a paused
    // origin whose endpoint always keeps its leases is resumed, not left paused for ever.
    const origin = new URL(endpoint.url).origin;
    await t.db.query(
      `insert into sluice.endpoints (origin, consecutive_failures, paused_until, paused_by, pauses)
       values ($1, 10, now() - interval '1 second', 'failures', 0)`,
      [origin],
    );
    endpoint.reply(() => KEEP);
    const id = await enqueue();
    const [push] = await endpoint.waitFor(1);
    const state = async () =>
      (
        await t.db.query<{ consecutive_failures: number; paused_by: string | null }>(
          'select consecutive_failures, paused_by from sluice.endpoints where origin = $1',
          [origin],
        )
      )[0];
    expect(await state()).toMatchObject({ paused_by: 'failures' });
    expect(await call(push!, 'complete')).toEqual({ status: 200, json: { task_id: id, status: 'succeeded' } });
    expect(await state()).toEqual({ consecutive_failures: 0, paused_by: null });
    await t.db.query('delete from sluice.endpoints');
  });

  it('complete sent several times at once answers 200 to every one, and completes once', async () => {
    endpoint.reply(() => KEEP);
    const id = await enqueue();
    const [push] = await endpoint.waitFor(1);
    const answers = await Promise.all([1, 2, 3, 4].map(() => call(push!, 'complete', { result: 'once' })));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    const final = await task(id);
    expect(final).toMatchObject({ status: 'succeeded', result: 'once' });
    expect(final.attempt_history).toHaveLength(1);
  });

  it('refuses a result nested too deeply with a 400', async () => {
    endpoint.reply(() => KEEP);
    await enqueue();
    const [push] = await endpoint.waitFor(1);
    const res = await fetch(`${sluice.url}/v1/leases/${lease(push!).id}/complete`, {
      method: 'POST',
      headers: { authorization: `Bearer ${lease(push!).token}`, 'content-type': 'application/json' },
      body: `{"result":${'['.repeat(9_000)}${']'.repeat(9_000)}}`,
    });
    expect(res.status).toBe(400);
    expect((await call(push!, 'complete')).status).toBe(200);
  });

  it('fail retries after retry_after_ms using the attempt; fail with retry:false kills it', async () => {
    endpoint.reply(() => KEEP);
    const id = await enqueue({ max_attempts: 5 });
    const [push] = await endpoint.waitFor(1);
    const before = Date.now();
    expect((await call(push!, 'fail', { error: 'upstream said no', retry_after_ms: 60_000 })).json).toMatchObject({ status: 'pending' });
    const waiting = await task(id);
    expect(waiting).toMatchObject({ status: 'pending', attempts: 1, last_error: 'upstream said no' });
    expect(Date.parse(waiting.run_at as string) - before).toBeGreaterThan(55_000);

    const id2 = await enqueue();
    const [, push2] = await endpoint.waitFor(2);
    expect((await call(push2!, 'fail', { error: 'bad input', retry: false })).json).toMatchObject({ task_id: id2, status: 'dead' });
    const dead = await task(id2);
    expect(dead).toMatchObject({ status: 'dead', last_error: 'bad input' });
    expect(dead.attempt_history).toEqual([
      expect.objectContaining({ outcome: 'dead', error: 'bad input', duration_ms: expect.any(Number) }),
    ]);
  });

  it('release gives the task back without using the attempt', async () => {
    endpoint.reply(() => KEEP);
    const id = await enqueue();
    const [push] = await endpoint.waitFor(1);
    expect((await call(push!, 'release', { delay_ms: 60_000 })).json).toMatchObject({ status: 'pending' });
    expect(await task(id)).toMatchObject({ status: 'pending', attempts: 0, lease: null });
  });

  it('a cancellation is seen by the next heartbeat: 409 cancelled, and the slot is free at once', async () => {
    endpoint.reply(() => KEEP);
    const id = await enqueue();
    const [push] = await endpoint.waitFor(1);
    expect((await api(`/v1/tasks/${id}/cancel`, {})).json).toMatchObject({ status: 'leased', cancel_requested: true });
    const beat = await call(push!, 'heartbeat');
    expect(beat).toMatchObject({ status: 409, json: { code: 'cancelled' } });
    const cancelled = await task(id);
    expect(cancelled).toMatchObject({ status: 'cancelled', lease: null });
    // Its attempt says what ended it: the cancel, not a release by its holder.
    expect(cancelled.attempt_history).toEqual([
      expect.objectContaining({ attempt: 1, outcome: 'cancelled', error: expect.stringMatching(/^cancelled/) }),
    ]);
    expect(cancelled.last_error).toMatch(/^cancelled/);
    expect((await call(push!, 'complete')).json).toMatchObject({ code: 'cancelled' });
  });

  it('refuses a missing, forged or foreign lease token', async () => {
    endpoint.reply(() => KEEP);
    await enqueue();
    await enqueue();
    const [a, b] = await endpoint.waitFor(2);
    expect((await api(`/v1/leases/${lease(a!).id}/heartbeat`, {}, secrets.apiKey)).status).toBe(401);
    expect((await api(`/v1/leases/${lease(a!).id}/heartbeat`, {}, `${lease(a!).token.slice(0, -4)}AAAA`)).status).toBe(401);
    expect((await api(`/v1/leases/${lease(a!).id}/heartbeat`, {}, lease(b!).token)).status).toBe(403);
    expect((await call(a!, 'heartbeat', { extend_ms: 'long' })).status).toBe(400);
    for (const p of [a!, b!]) expect((await call(p, 'complete')).status).toBe(200);
  });
});

describe('fencing and expiry', () => {
  it('a holder whose lease expired and was reclaimed changes nothing: its heartbeat and complete get 409', async () => {
    let n = 0;
    endpoint.reply(() => (++n === 1 ? KEEP : { status: 200, body: 'second holder' }));
    const id = await enqueue({ backoff: { initial_ms: 0, max_ms: 0 } });
    const [first] = await endpoint.waitFor(1);
    // No heartbeat: the lease (1.5 s) expires, the task is reaped and pushed again.
    const [, second] = await endpoint.waitFor(2, 6_000);
    expect(second!.headers['sluice-attempt']).toBe('2');
    await until(async () => ((await task(id)).status === 'succeeded' ? true : undefined));
    expect(await call(first!, 'heartbeat')).toMatchObject({ status: 409, json: { code: 'lease_lost' } });
    expect(await call(first!, 'complete', { result: 'stale' })).toMatchObject({ status: 409, json: { code: 'lease_lost' } });
    expect(await call(first!, 'fail', { error: 'stale' })).toMatchObject({ status: 409, json: { code: 'lease_lost' } });
    const final = await task(id);
    expect(final).toMatchObject({ status: 'succeeded', result: 'second holder', attempts: 2 });
    expect((final.attempt_history as Array<{ outcome: string; error: string }>).map((a) => a.outcome)).toEqual(['retry', 'succeeded']);
    expect((final.attempt_history as Array<{ error: string | null }>)[0]!.error).toMatch(/lease expired/);
  });

  it('heartbeats keep the slot well past the first lease; nobody else gets it; completing hands it on at once', async () => {
    endpoint.reply((push) => (push.text === '"long"' ? KEEP : { status: 200 }));
    const long = await enqueue({ queue: 'single', body: 'long' });
    const [push] = await endpoint.waitFor(1);
    await enqueue({ queue: 'single', body: 'next' });
    // 4 s of heartbeats on a 1.5 s lease, in a queue of concurrency 1.
    for (let i = 0; i < 8; i++) {
      await sleep(500);
      expect((await call(push!, 'heartbeat')).status).toBe(200);
    }
    expect(endpoint.received).toHaveLength(1);
    const completedAt = Date.now();
    expect((await call(push!, 'complete')).status).toBe(200);
    const [, next] = await endpoint.waitFor(2);
    const handOff = next!.receivedAt - completedAt;
    expect(await task(long)).toMatchObject({ status: 'succeeded', attempts: 1 });
    console.info(`leases: slot hand-off after complete ${handOff} ms`);
    expect(handOff).toBeLessThan(1_000);
  });

  it('an endpoint that stops heartbeating loses the slot to the next task within the lease and a pass', async () => {
    endpoint.reply((push) => (push.text === '"quiet"' ? KEEP : { status: 200 }));
    await enqueue({ queue: 'single', body: 'quiet', backoff: { initial_ms: 60_000 } });
    const [push] = await endpoint.waitFor(1);
    await enqueue({ queue: 'single', body: 'waiting' });
    const leasedUntil = Date.parse(push!.headers['sluice-lease-expires-at'] as string);
    const [, next] = await endpoint.waitFor(2, 6_000);
    expect(next!.text).toBe('"waiting"');
    const reclaim = next!.receivedAt - push!.receivedAt;
    console.info(
      `leases: slot reclaimed ${reclaim} ms after the silent push (lease 1500 ms; ${next!.receivedAt - leasedUntil} ms after expiry)`,
    );
    expect(next!.receivedAt).toBeGreaterThanOrEqual(leasedUntil - 50);
  });
});

describe('dead letters', () => {
  it('are listed with their last error and every attempt, and can be redriven', async () => {
    endpoint.reply(() => ({ status: 500, body: 'broken' }));
    const id = await enqueue({ max_attempts: 2, backoff: { initial_ms: 0, max_ms: 0 } });
    await until(async () => ((await task(id)).status === 'dead' ? true : undefined));
    const listed = (await api('/v1/tasks?status=dead')).json.tasks as Array<Record<string, unknown>>;
    expect(listed).toEqual([expect.objectContaining({ id, last_error: 'HTTP 500: broken (attempt 2 of 2)', last_status: 500 })]);
    const history = (await task(id)).attempt_history as Array<Record<string, unknown>>;
    expect(history.map((a) => [a.attempt, a.outcome, a.http_status])).toEqual([
      [1, 'retry', 500],
      [2, 'dead', 500],
    ]);
    expect(history.every((a) => typeof a.duration_ms === 'number')).toBe(true);

    expect((await api(`/v1/tasks/${id}/retry`, {})).json).toMatchObject({ status: 'pending', attempts: 0 });
    endpoint.reply(() => ({ status: 200 }));
    await until(async () => ((await task(id)).status === 'succeeded' ? true : undefined));
    expect((await api(`/v1/tasks/${id}/retry`, {})).json).toMatchObject({ code: 'not_dead' });
  });
});
