/**
 * Debounce over real HTTP on the Node server (migrations/0018_debounce.sql): trailing and leading
 * joins, the max_wait cap, a task that ran no longer joinable, the refusals, and racing enqueues
 * that make one task; then one push for a burst of enqueues.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { debouncesSweep } from '../../src/db/debounce.ts';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, emptyTables, type TestDatabase } from '../helpers/db.ts';
import { startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';

let t: TestDatabase;
let endpoint: TestEndpoint;
let secrets: TestSecrets;
/** Serves the API only: nothing is pushed unless a test starts a dispatching server. */
let api: NodeSluice;

beforeAll(async () => {
  [t, endpoint, secrets] = await Promise.all([createTestDatabase(), startEndpoint(), makeSecrets()]);
  api = await startNodeSluice({ env: testEnv(secrets, t.url), dispatch: false });
});
afterAll(async () => {
  await api?.close();
  await endpoint?.close();
  await t?.drop();
});
beforeEach(async () => {
  await emptyTables(t.db, 'sluice.tasks, sluice.lanes, sluice.debounces');
  endpoint.received.length = 0;
  endpoint.reply(() => ({ status: 200 }));
});

async function enqueue(task: object, base = api.url) {
  const res = await fetch(`${base}/v1/tasks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(task),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> & { id: string; body: unknown } };
}
const row = async (id: string) =>
  (
    await t.db.query<{ body: string; due_in_ms: number; status: string }>(
      `select body, (extract(epoch from run_at - now()) * 1000)::float8 as due_in_ms, status from sluice.all_tasks where id = $1`,
      [id],
    )
  )[0]!;
const count = async () => (await t.db.query<{ n: number }>('select count(*)::int as n from sluice.all_tasks'))[0]!.n;

describe('debounce', () => {
  it('trailing: later enqueues join the pending task, which takes the last body and comes due a period after it', async () => {
    const debounce = { key: 'doc-7', period_ms: 60_000 };
    const first = await enqueue({ url: `${endpoint.url}/d`, body: { v: 1 }, debounce });
    expect(first).toMatchObject({ status: 201, json: { deduplicated: false, debounced: false } });
    const second = await enqueue({ url: `${endpoint.url}/d`, body: { v: 2 }, debounce });
    expect(second).toMatchObject({ status: 200, json: { id: first.json.id, debounced: true } });
    const third = await enqueue({ url: `${endpoint.url}/d`, body: { v: 3 }, debounce });
    expect(third.json.id).toBe(first.json.id);
    expect(await count()).toBe(1);
    const task = await row(first.json.id);
    expect(JSON.parse(task.body)).toEqual({ v: 3 });
    expect(task.due_in_ms).toBeGreaterThan(55_000);
    // Another key, another task.
    const other = await enqueue({ url: `${endpoint.url}/d`, body: { v: 1 }, debounce: { ...debounce, key: 'doc-8' } });
    expect(other.json.id).not.toBe(first.json.id);
  });

  it('trailing: never due later than max_wait_ms after the first enqueue', async () => {
    const debounce = { key: 'k', period_ms: 60_000, max_wait_ms: 90_000 };
    const first = await enqueue({ url: `${endpoint.url}/d`, debounce });
    // As if the first had come 80 s ago: the next join may move it on by 10 s at most.
    await t.db.query(`update sluice.debounces set until = now() + interval '10 seconds'`);
    await enqueue({ url: `${endpoint.url}/d`, debounce });
    const task = await row(first.json.id);
    expect(task.due_in_ms).toBeLessThanOrEqual(10_000);
  });

  it('trailing: once the task is no longer pending, the next enqueue makes a new one', async () => {
    const debounce = { key: 'k', period_ms: 60_000 };
    const first = await enqueue({ url: `${endpoint.url}/d`, debounce });
    await t.db.query(
      `update sluice.tasks set status = 'leased', lease_id = gen_random_uuid(), leased_at = now(), lease_expires_at = now() + interval '1 minute'`,
    );
    const next = await enqueue({ url: `${endpoint.url}/d`, debounce });
    expect(next).toMatchObject({ status: 201, json: { debounced: false } });
    expect(next.json.id).not.toBe(first.json.id);
    // The first's row was taken over; a spent row goes with the sweep.
    expect(await debouncesSweep(t.db)).toBe(0);
    await t.db.query(
      `update sluice.tasks set status = 'leased', lease_id = gen_random_uuid(), leased_at = now(), lease_expires_at = now() + interval '1 minute' where id = $1`,
      [next.json.id],
    );
    expect(await debouncesSweep(t.db)).toBe(1);
  });

  it('leading: the first runs at once; those within the period join it without a task of their own', async () => {
    const debounce = { key: 'k', period_ms: 60_000, mode: 'leading' };
    const first = await enqueue({ url: `${endpoint.url}/d`, body: { v: 1 }, debounce });
    expect((await row(first.json.id)).due_in_ms).toBeLessThanOrEqual(0);
    const second = await enqueue({ url: `${endpoint.url}/d`, body: { v: 2 }, debounce });
    expect(second).toMatchObject({ status: 200, json: { id: first.json.id, debounced: true } });
    expect(JSON.parse((await row(first.json.id)).body)).toEqual({ v: 1 });
    // Its period over, the next one runs.
    await t.db.query(`update sluice.debounces set until = now() - interval '1 second'`);
    const third = await enqueue({ url: `${endpoint.url}/d`, debounce });
    expect(third.json.id).not.toBe(first.json.id);
    expect(await count()).toBe(2);
  });

  it('refuses what cannot go together, naming the field; a batch with one bad item writes nothing', async () => {
    const bad = [
      [{ debounce: { key: 'k', period_ms: 1_000 }, dedup_key: 'x' }, /either `dedup_key` or `debounce`/],
      [{ debounce: { key: 'k', period_ms: 1_000 }, delay_ms: 5 }, /trailing debounce sets when the task runs/],
      [{ debounce: { key: 'k', period_ms: 1_000, max_wait_ms: 500 } }, /at least period_ms/],
      [{ debounce: { key: '', period_ms: 1_000 } }, /debounce\.key/],
      [{ debounce: { key: 'k', period_ms: 1_000, mode: 'sometimes' } }, /debounce\.mode/],
    ] as const;
    for (const [extra, message] of bad) {
      const res = await enqueue({ url: `${endpoint.url}/d`, ...extra });
      expect(res.status, JSON.stringify(extra)).toBe(400);
      expect(JSON.stringify(res.json)).toMatch(message);
    }
    const batch = await fetch(`${api.url}/v1/tasks/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        tasks: [
          { url: `${endpoint.url}/d`, debounce: { key: 'k', period_ms: 1_000 } },
          { url: `${endpoint.url}/d`, debounce: { key: 'k', period_ms: 1_000, max_wait_ms: 1 } },
        ],
      }),
    });
    expect(batch.status).toBe(400);
    expect(await count()).toBe(0);
  });

  it('racing enqueues of one key make one task; a batch joins within itself, in order', async () => {
    const debounce = { key: 'race', period_ms: 60_000 };
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => enqueue({ url: `${endpoint.url}/d`, body: { i }, debounce })));
    expect(new Set(answers.map((a) => a.json.id)).size).toBe(1);
    expect(answers.filter((a) => a.json.debounced === false)).toHaveLength(1);
    const res = await fetch(`${api.url}/v1/tasks/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json', prefer: 'return=minimal' },
      body: JSON.stringify({
        tasks: [
          { url: `${endpoint.url}/d`, debounce: { key: 'b', period_ms: 60_000 } },
          { url: `${endpoint.url}/d` },
          { url: `${endpoint.url}/d`, debounce: { key: 'b', period_ms: 60_000 } },
        ],
      }),
    });
    const { tasks } = (await res.json()) as { tasks: Array<{ id: string; debounced?: boolean }> };
    expect(tasks.map((x) => x.debounced)).toEqual([false, undefined, true]);
    expect(tasks[2]!.id).toBe(tasks[0]!.id);
  });

  it('a burst of enqueues is pushed once, with the last body', async () => {
    const sluice = await startNodeSluice({ env: testEnv(secrets, t.url) });
    try {
      const debounce = { key: 'burst', period_ms: 300 };
      for (let v = 1; v <= 5; v++) await enqueue({ url: `${endpoint.url}/burst`, body: { v }, debounce }, sluice.url);
      const [push] = await endpoint.waitFor(1, 10_000);
      expect(JSON.parse(push!.text)).toEqual({ v: 5 });
      await expect.poll(async () => (await t.db.query(`select 1 from sluice.all_tasks where status = 'succeeded'`)).length).toBe(1);
      expect(endpoint.received.filter((p) => p.path === '/burst')).toHaveLength(1);
      // Leading: the first is pushed at once; one within the period, even once that has
      // finished, joins it (read from history), in a minimal batch answer too.
      const lead = await enqueue(
        { url: `${endpoint.url}/lead`, debounce: { key: 'lead', period_ms: 60_000, mode: 'leading' } },
        sluice.url,
      );
      await expect.poll(async () => (await row(lead.json.id)).status).toBe('succeeded');
      const res = await fetch(`${sluice.url}/v1/tasks/batch`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json', prefer: 'return=minimal' },
        body: JSON.stringify({ tasks: [{ url: `${endpoint.url}/lead`, debounce: { key: 'lead', period_ms: 60_000, mode: 'leading' } }] }),
      });
      expect(((await res.json()) as { tasks: unknown[] }).tasks).toEqual([
        { id: lead.json.id, queue: 'default', status: 'succeeded', deduplicated: false, debounced: true },
      ]);
      expect(endpoint.received.filter((p) => p.path === '/lead')).toHaveLength(1);
    } finally {
      await sluice.close();
    }
  });
});
