/**
 * Waits on child tasks (docs/guide.md "Waits"), on the Node server over real HTTP: the seed's two
 * examples (a parent waiting on a child on another queue gives its cluster slot back; on its
 * own queue, the child runs in the parent's slot), the recursive wait refused as a deadlock,
 * a waiting parent still holding its queue slot, and cancellation reaching the children.
 */
import { serve } from '@hono/node-server';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { taskCancel } from '../../src/db/tasks.ts';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { createHandler } from '../../src/sdk/index.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, emptyTables, type TestDatabase } from '../helpers/db.ts';
import { startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';
import { playFamilies, type WaitOutcome } from '../helpers/waits.ts';

let t: TestDatabase;
let endpoint: TestEndpoint;
let secrets: TestSecrets;
let sluice: NodeSluice;
let waits: WaitOutcome[];

beforeAll(async () => {
  [t, endpoint, secrets] = await Promise.all([createTestDatabase(), startEndpoint(), makeSecrets()]);
  const env = testEnv(secrets, t.url, {
    SLUICE_CLUSTER_CAP: '1',
    SLUICE_QUEUES: JSON.stringify({ solo: { concurrency: 1 } }),
  });
  sluice = await startNodeSluice({ env, maxSleepMs: 3_600_000 });
});
afterAll(async () => {
  await sluice?.close();
  await endpoint?.close();
  await t?.drop();
});
beforeEach(async () => {
  await emptyTables(t.db, 'sluice.tasks, sluice.lanes');
  endpoint.received.length = 0;
  ({ waits } = playFamilies(endpoint, () => sluice.url, secrets.apiKey));
});

// biome-ignore lint/suspicious/noExplicitAny: the API's JSON answers, read field by field (their shapes are checked against /openapi.json)
type Json = any;

async function api(path: string, init: { method?: string; body?: unknown } = {}): Promise<{ status: number; json: Json }> {
  const res = await fetch(`${sluice.url}${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json' },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
  return { status: res.status, json: await res.json().catch(() => null) };
}

async function enqueue(body: Record<string, unknown>): Promise<string> {
  const res = await api('/v1/tasks', { method: 'POST', body: { url: `${endpoint.url}/parent`, ...body } });
  expect(res.status).toBe(201);
  return res.json.id as string;
}

async function settled(id: string): Promise<Json> {
  await expect.poll(async () => (await api(`/v1/tasks/${id}`)).json.status, { timeout: 15_000 }).toMatch(/succeeded|dead|cancelled/);
  return (await api(`/v1/tasks/${id}`)).json;
}

describe('waits on children', () => {
  it('give the cluster slot back: with a cluster cap of 1, the child runs and the parent resumes', async () => {
    const parent = await enqueue({ queue: 'parents', body: { family: { children: [{ queue: 'kids', body: { n: 1 } }] } } });
    const done = await settled(parent);
    expect(done.status).toBe('succeeded');
    // A resume is not a retry: one attempt, one resume; the wait is in its history.
    expect(done.attempts).toBe(1);
    expect(done.resumes).toBe(1);
    expect(done.attempt_history.map((a: { outcome: string }) => a.outcome)).toEqual(['waiting', 'succeeded']);
    expect(waits).toHaveLength(1);
    expect(waits[0]).toMatchObject({ taskId: parent, status: 200, answer: { lent_queue: false } });
    const { json } = await api(`/v1/tasks/${parent}/children`);
    expect(json.children).toHaveLength(1);
    expect(json.children[0]).toMatchObject({ parent_id: parent, status: 'succeeded', queue: 'kids' });
    // Order at the endpoint: parent, child, parent again (with Sluice-Resume: 1).
    const order = endpoint.received.map((p) => `${p.path}${p.headers['sluice-resume'] ? `#${p.headers['sluice-resume']}` : ''}`);
    expect(order).toEqual(['/parent', '/child', '/parent#1']);
  });

  it("lend the parent's queue slot to a child on its own queue: queue limit 1, the child runs in it", async () => {
    const parent = await enqueue({ queue: 'solo', body: { family: { children: [{ queue: 'solo' }] } } });
    expect((await settled(parent)).status).toBe('succeeded');
    expect(waits[0]).toMatchObject({ status: 200, answer: { lent_queue: true } });
  });

  it('refuse a recursive wait that could never be served: 409 recursive_wait_deadlock naming the chain', async () => {
    // Queue limit 1: the parent lends its slot to the child; the child waiting on a grandchild
    // would need a second slot lent.
    const parent = await enqueue({
      queue: 'solo',
      body: { family: { children: [{ queue: 'solo', body: { family: { children: [{ queue: 'solo' }] } } }] } },
    });
    expect((await settled(parent)).status).toBe('succeeded');
    expect(waits).toHaveLength(2);
    const [first, second] = waits as [WaitOutcome, WaitOutcome];
    expect(first).toMatchObject({ taskId: parent, status: 200 });
    expect(second.status).toBe(409);
    expect(second.answer.code).toBe('recursive_wait_deadlock');
    // The parent lent its slot; the child would hold it itself, and its grandchild needs it.
    expect(second.answer.detail).toContain(`chain ${second.taskId} (solo) → ${second.taskId} (solo)`);
    expect(second.answer.detail).toContain('queue solo (limit 1)');
  });

  it("keep the parent's queue slot while its child runs elsewhere: another task of its queue waits", async () => {
    const parent = await enqueue({ queue: 'solo', body: { family: { children: [{ queue: 'kids', delay_ms: 300 }] } } });
    await endpoint.waitFor(1);
    await expect.poll(async () => (await api(`/v1/tasks/${parent}`)).json.status).toBe('waiting');
    // Shown where its slot is: no lease, one waiting task holding the queue's only slot.
    const { json: slots } = await api('/v1/queues/solo/concurrency');
    expect(slots.queue_level).toMatchObject({ limit: 1, active: 0, waiting: 1 });
    const other = await enqueue({ queue: 'solo', url: `${endpoint.url}/other` });
    await settled(other);
    const order = endpoint.received.map((p) => `${p.path}${p.headers['sluice-resume'] ? '#resume' : ''}`);
    // The other task of "solo" only after the parent's resume has ended.
    expect(order).toEqual(['/parent', '/child', '/parent#resume', '/other']);
  });

  it('cancel the children with their parent', async () => {
    const parent = await enqueue({ queue: 'parents', body: { family: { children: [{ queue: 'kids', delay_ms: 60_000 }] } } });
    await expect.poll(async () => (await api(`/v1/tasks/${parent}`)).json.status).toBe('waiting');
    const cancelled = await api(`/v1/tasks/${parent}/cancel`, { method: 'POST' });
    expect(cancelled.json.status).toBe('cancelled');
    const { json } = await api(`/v1/tasks/${parent}/children`);
    expect(json.children.map((c: { status: string }) => c.status)).toEqual(['cancelled']);
  });

  it('keep a waiting task unfinished: its dedup key still answers with it, and its queue counts it', async () => {
    const parent = await enqueue({
      queue: 'parents',
      dedup_key: 'nightly',
      body: { family: { children: [{ queue: 'kids', delay_ms: 60_000 }] } },
    });
    await expect.poll(async () => (await api(`/v1/tasks/${parent}`)).json.status).toBe('waiting');
    const again = await api('/v1/tasks', {
      method: 'POST',
      body: { queue: 'parents', url: `${endpoint.url}/parent`, dedup_key: 'nightly' },
    });
    expect(again.status).toBe(200);
    expect(again.json).toMatchObject({ id: parent, deduplicated: true });
    expect((await api('/v1/queues/parents')).json.counts).toMatchObject({ waiting: 1, pending: 0, leased: 0 });
    await api(`/v1/tasks/${parent}/cancel`, { method: 'POST' });
  });

  it('never turn a task that finished while the cancel waited for it into cancelled', async () => {
    const [row] = await t.db.query<{ id: string }>(
      `insert into sluice.tasks (queue, url, status, lease_id, leased_at, lease_expires_at, attempts, max_attempts, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, timeout_ms, lease_ms)
       values ('race', 'http://127.0.0.1:9/x', 'leased', gen_random_uuid(), now(), now() + interval '1 minute', 1, 3, 1000, 1000, 2, 0, 1000, 60000)
       returning id::text as id`,
    );
    const id = row!.id;
    // A settle holds the row, then commits `succeeded` while the cancel waits for it.
    const settle = new pg.Client(t.url);
    await settle.connect();
    try {
      await settle.query('begin');
      await settle.query(
        `update sluice.tasks set status = 'succeeded', finished_at = now(), lease_id = null, leased_at = null, lease_expires_at = null where id = $1`,
        [id],
      );
      const cancelling = taskCancel(t.db, id).then(
        () => 'cancelled',
        (e: { code?: string }) => e.code,
      );
      await expect
        .poll(async () => (await t.db.query(`select 1 from pg_locks where not granted and locktype = 'transactionid'`)).length)
        .toBe(1);
      await settle.query('commit');
      expect(await cancelling).toBe('already_finished');
    } finally {
      await settle.end();
    }
    const [after] = await t.db.query<{ status: string }>('select status from sluice.all_tasks where id = $1', [id]);
    expect(after!.status).toBe('succeeded');
  });

  it('refuse bad waits and parents by name', async () => {
    const orphan = await api('/v1/tasks', { method: 'POST', body: { url: `${endpoint.url}/x`, parent_id: '999999' } });
    expect(orphan.status).toBe(400);
    expect(JSON.stringify(orphan.json)).toContain('parent_id');
    for (const parent_id of ['abc', '9999999999999999999', '0']) {
      const bad = await api('/v1/tasks', { method: 'POST', body: { url: `${endpoint.url}/x`, parent_id } });
      expect(bad.status).toBe(400);
    }
  });

  it('work from the SDK: ctx.waitFor in lease mode, and push.resume on the push after', async () => {
    const seen: Array<{ resume: number; attempt: number }> = [];
    const handler = createHandler(
      async (push, ctx) => {
        seen.push({ resume: push.resume, attempt: push.attempt });
        if (push.resume > 0) return { children: (await api(`/v1/tasks/${push.taskId}/children`)).json.children.length };
        await api('/v1/tasks', { method: 'POST', body: { queue: 'kids', url: `${endpoint.url}/child`, parent_id: push.taskId } });
        return ctx.waitFor();
      },
      { sluiceUrl: sluice.url, mode: 'lease' },
    );
    const server = serve({ fetch: (request) => handler(request), port: 0, hostname: '127.0.0.1' });
    await new Promise((r) => server.once('listening', r));
    const { port } = server.address() as { port: number };
    try {
      const parent = await enqueue({ queue: 'parents', url: `http://127.0.0.1:${port}/sdk` });
      const done = await settled(parent);
      expect(done).toMatchObject({ status: 'succeeded', attempts: 1, resumes: 1, result: '{"children":1}' });
      expect(seen).toEqual([
        { resume: 0, attempt: 1 },
        { resume: 1, attempt: 1 },
      ]);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});

describe('waits that together would never end', () => {
  let other: NodeSluice;
  beforeAll(async () => {
    other = await startNodeSluice({
      env: testEnv(secrets, t.url, {
        SLUICE_QUEUES: JSON.stringify({ duo: { concurrency: 2 }, a: { concurrency: 1 }, b: { concurrency: 1 } }),
      }),
      maxSleepMs: 3_600_000,
    });
    // The first file's server shares the database: only this one dispatches from here on.
    await sluice.close();
    sluice = other;
  });

  async function allFinished(ids: string[]): Promise<string[]> {
    const statuses = async () => Promise.all(ids.map(async (id) => (await api(`/v1/tasks/${id}`)).json.status as string));
    await expect.poll(async () => (await statuses()).every((s) => s === 'succeeded'), { timeout: 20_000 }).toBe(true);
    return statuses();
  }

  it('a fan-out past what a queue can lend: the wait that would shut the queue is refused, and everything ends', async () => {
    // Children come due later, so all four parents run (two at a time) and wait first.
    const parents: string[] = [];
    for (let i = 0; i < 4; i++)
      parents.push(await enqueue({ queue: 'duo', body: { family: { children: [{ queue: 'duo', delay_ms: 300 }] } } }));
    await allFinished(parents);
    const refused = waits.filter((w) => w.status !== 200);
    expect(refused.every((w) => w.answer.code === 'recursive_wait_deadlock')).toBe(true);
    // Every child ends too (the refused parent's child runs on after its parent ended).
    const children = async () =>
      (await t.db.query<{ status: string }>(`select status from sluice.all_tasks where parent_id is not null`)).map((c) => c.status);
    await expect.poll(children, { timeout: 20_000 }).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
  });

  it('two queues waiting on each other: the wait that closes the cycle is refused, naming it', async () => {
    const pa = await enqueue({ queue: 'a', body: { family: { children: [{ queue: 'b', delay_ms: 200 }] } } });
    await expect.poll(async () => (await api(`/v1/tasks/${pa}`)).json.status).toBe('waiting');
    const pb = await enqueue({ queue: 'b', body: { family: { children: [{ queue: 'a' }] } } });
    await allFinished([pa, pb]);
    const refused = waits.find((w) => w.taskId === pb)!;
    expect(refused.status).toBe(409);
    expect(refused.answer.code).toBe('recursive_wait_deadlock');
    expect(refused.answer.detail).toContain(`chain ${pb} (b) → ${pa} (a) → ${pb} (b)`);
  });
});
