/**
 * Dedup keys that outlive their task (`dedup_ttl_ms`, migrations/0024_dedup_ttl.sql), over real
 * HTTP on the Node server and against the database: a finished task answers for its key until
 * its TTL runs out (time moved by moving its finish back), in every final status, singly, in a
 * batch and in a minimal answer; a redrive; the refusals; and the races: enqueues on connections
 * of their own while the task finishes, and after it finished.
 */
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { taskCancel, taskRedrive } from '../../src/db/tasks.ts';
import { openPgDb } from '../../src/node/pg-db.ts';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, emptyTables, type TestDatabase } from '../helpers/db.ts';
import { startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';
import { newTask } from '../helpers/tasks.ts';

let t: TestDatabase;
let endpoint: TestEndpoint;
let secrets: TestSecrets;
/** Serves the API only: nothing is pushed unless a test starts a dispatching server. */
let api: NodeSluice;

beforeAll(async () => {
  [t, endpoint, secrets] = await Promise.all([createTestDatabase(), startEndpoint(), makeSecrets()]);
  api = await startNodeSluice({ env: testEnv(secrets, t.url, { SLUICE_RETENTION: '1h', SLUICE_MAX_LEASE_MS: '600000' }), dispatch: false });
});
afterAll(async () => {
  await api?.close();
  await endpoint?.close();
  await t?.drop();
});
beforeEach(async () => {
  await emptyTables(t.db, 'sluice.tasks, sluice.lanes');
  endpoint.received.length = 0;
  endpoint.reply(() => ({ status: 200 }));
});

async function call(path: string, body: unknown, headers: Record<string, string> = {}, base = api.url) {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> & { id: string } };
}
const enqueue = (task: object) => call('/v1/tasks', { url: `${endpoint.url}/hook`, ...task });
/** As if the task had finished `ms` earlier than it did: time moves, the TTL runs from its finish. */
const finishedAgo = (id: string, ms: number) =>
  t.db.query(`update sluice.finished set finished_at = finished_at - make_interval(secs => $2::float8 / 1000) where id = $1`, [id, ms]);
const count = async () => (await t.db.query<{ n: number }>('select count(*)::int as n from sluice.all_tasks'))[0]!.n;

describe('dedup_ttl_ms', () => {
  it('a finished task answers for its key until its TTL has run from its finish; then the key is free', async () => {
    const first = await enqueue({ dedup_key: 'order-1', dedup_ttl_ms: 60_000 });
    expect(first).toMatchObject({ status: 201, json: { dedup_key: 'order-1', dedup_ttl_ms: 60_000, deduplicated: false } });
    await call(`/v1/tasks/${first.json.id}/cancel`, {});
    const again = await enqueue({ dedup_key: 'order-1', body: { other: true } });
    expect(again).toMatchObject({ status: 200, json: { id: first.json.id, status: 'cancelled', deduplicated: true } });
    // 59 s after its finish it still holds the key; 61 s after, it no longer does.
    await finishedAgo(first.json.id, 59_000);
    expect((await enqueue({ dedup_key: 'order-1' })).json.id).toBe(first.json.id);
    await finishedAgo(first.json.id, 2_000);
    const fresh = await enqueue({ dedup_key: 'order-1', dedup_ttl_ms: 60_000 });
    expect(fresh).toMatchObject({ status: 201, json: { deduplicated: false } });
    expect(fresh.json.id).not.toBe(first.json.id);
    // The key belongs to its queue, and a task without a TTL frees its key when it finishes.
    expect((await enqueue({ queue: 'other', dedup_key: 'order-1' })).status).toBe(201);
    const plain = await enqueue({ dedup_key: 'plain' });
    await call(`/v1/tasks/${plain.json.id}/cancel`, {});
    expect((await enqueue({ dedup_key: 'plain' })).status).toBe(201);
  });

  it('holds after a push succeeded or went dead, in a batch and in a minimal answer too', async () => {
    const sluice = await startNodeSluice({ env: testEnv(secrets, t.url, { SLUICE_RETENTION: '1h', SLUICE_MAX_LEASE_MS: '600000' }) });
    try {
      endpoint.reply((req) => ({ status: req.path === '/dead' ? 500 : 200 }));
      const ok = await call('/v1/tasks', { url: `${endpoint.url}/ok`, dedup_key: 'ok', dedup_ttl_ms: 3_600_000 }, {}, sluice.url);
      const dead = await call(
        '/v1/tasks',
        { url: `${endpoint.url}/dead`, dedup_key: 'dead', dedup_ttl_ms: 3_600_000, max_attempts: 1 },
        {},
        sluice.url,
      );
      const status = async (id: string) =>
        (await t.db.query<{ status: string }>('select status from sluice.all_tasks where id = $1', [id]))[0]?.status;
      await expect.poll(() => status(ok.json.id)).toBe('succeeded');
      await expect.poll(() => status(dead.json.id)).toBe('dead');
    } finally {
      await sluice.close();
    }
    const [ok, dead] = (await t.db.query<{ id: string }>(`select id::text as id from sluice.finished order by id`)).map((r) => r.id);
    const batch = await call('/v1/tasks/batch', {
      tasks: [
        { url: `${endpoint.url}/hook`, dedup_key: 'dead' },
        { url: `${endpoint.url}/hook`, dedup_key: 'new', dedup_ttl_ms: 1_000 },
        { url: `${endpoint.url}/hook`, dedup_key: 'ok' },
      ],
    });
    const tasks = (batch.json as unknown as { tasks: Array<{ id: string; status: string; deduplicated: boolean }> }).tasks;
    expect(tasks.map((x) => [x.status, x.deduplicated])).toEqual([
      ['dead', true],
      ['pending', false],
      ['succeeded', true],
    ]);
    expect([tasks[0]!.id, tasks[2]!.id]).toEqual([dead, ok]);
    const minimal = await call(
      '/v1/tasks/batch',
      { tasks: [{ url: `${endpoint.url}/hook`, dedup_key: 'ok' }] },
      { prefer: 'return=minimal' },
    );
    expect(minimal.json).toEqual({ tasks: [{ id: ok, queue: 'default', status: 'succeeded', deduplicated: true }] });
  });

  it('a redriven task takes its key back while it runs again, and holds it for its TTL from its new finish', async () => {
    const [dead] = await taskInsertMany(t.db, [newTask({ dedupKey: 'r', dedupTtlMs: 60_000 })]);
    const id = dead!.task.id;
    await t.db.query(
      `update sluice.tasks set status = 'leased', lease_id = gen_random_uuid(), leased_at = now(), lease_expires_at = now() + interval '1 minute', attempts = 1 where id = $1`,
      [id],
    );
    await t.db.query(
      `with gone as (delete from sluice.tasks where id = $1 returning *)
       insert into sluice.finished (bucket, id, queue, status, priority, attempts, max_attempts, deferrals, resumes, finished_at, created_at,
         run_at, timeout_ms, lease_ms, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, method, url, headers, dedup_key, dedup_ttl_ms)
       select (select max(bucket) from sluice.history_buckets), id, queue, 'dead', priority, attempts, max_attempts, deferrals, resumes, now(),
         created_at, run_at, timeout_ms, lease_ms, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, method, url, headers, dedup_key, dedup_ttl_ms
       from gone`,
      [id],
    );
    expect((await enqueue({ dedup_key: 'r' })).json).toMatchObject({ id, status: 'dead', deduplicated: true });
    const redriven = await taskRedrive(t.db, id);
    expect(redriven).toMatchObject({ status: 'pending', dedupTtlMs: 60_000 });
    expect((await enqueue({ dedup_key: 'r' })).json).toMatchObject({ id, status: 'pending', deduplicated: true });
    await taskCancel(t.db, id);
    await finishedAgo(id, 30_000);
    expect((await enqueue({ dedup_key: 'r' })).json).toMatchObject({ id, status: 'cancelled', deduplicated: true });
  });

  it('refuses a bad TTL, one without a dedup_key and one longer than retention, naming the field', async () => {
    for (const dedup_ttl_ms of [0, -1, 1.5, '60000', null, 2_592_000_001, true]) {
      const res = await enqueue({ dedup_key: 'k', dedup_ttl_ms });
      expect(res.status, String(dedup_ttl_ms)).toBe(400);
      expect(res.json.issues, String(dedup_ttl_ms)).toEqual([{ path: 'dedup_ttl_ms', message: expect.any(String) }]);
    }
    expect((await enqueue({ dedup_ttl_ms: 1_000 })).json.issues).toEqual([
      { path: 'dedup_ttl_ms', message: 'goes with `dedup_key`: it says how long the key is kept after the task finishes' },
    ]);
    // SLUICE_RETENTION=1h and leases of at most 10 minutes here: history keeps a finished task an hour, its key no longer.
    expect((await enqueue({ dedup_key: 'k', dedup_ttl_ms: 3_600_001 })).json.issues).toEqual([
      {
        path: 'dedup_ttl_ms',
        message:
          'is at most how long history keeps a finished task on this deployment (3600000 ms: SLUICE_RETENTION, at least SLUICE_MAX_LEASE_MS)',
      },
    ]);
    const batch = await call('/v1/tasks/batch', {
      tasks: [{ url: `${endpoint.url}/hook` }, { url: `${endpoint.url}/hook`, dedup_ttl_ms: 5 }],
    });
    expect(batch.json.issues).toEqual([{ path: 'tasks.1.dedup_ttl_ms', message: expect.stringContaining('dedup_key') }]);
    const schedule = await call('/v1/schedules', {
      name: 'nightly',
      cron: '0 3 * * *',
      task: { url: `${endpoint.url}/hook`, dedup_ttl_ms: 5 },
    });
    expect(schedule.status).toBe(400);
    expect(JSON.stringify(schedule.json.issues)).toContain('task.dedup_ttl_ms');
    expect(await count()).toBe(0);
  });
});

describe('dedup_ttl_ms under racing enqueues, each on a connection of its own', () => {
  it('after the task finished, every one answers that task; after its TTL, they make exactly one', async () => {
    const [made] = await taskInsertMany(t.db, [newTask({ dedupKey: 'race', dedupTtlMs: 60_000 })]);
    await taskCancel(t.db, made!.task.id);
    const racers = Array.from({ length: 8 }, () => openPgDb(t.url, 1));
    try {
      const race = () => Promise.all(racers.map((db) => taskInsertMany(db, [newTask({ dedupKey: 'race', dedupTtlMs: 60_000 })])));
      const held = (await race()).map(([e]) => [e!.task.id, e!.deduplicated]);
      expect(held).toEqual(racers.map(() => [made!.task.id, true]));
      await finishedAgo(made!.task.id, 60_000);
      const after = (await race()).map(([e]) => e!);
      expect(new Set(after.map((e) => e.task.id)).size).toBe(1);
      expect(after.filter((e) => !e.deduplicated)).toHaveLength(1);
      expect(after[0]!.task.id).not.toBe(made!.task.id);
    } finally {
      await Promise.all(racers.map((db) => db.close()));
    }
  });

  it('an enqueue that meets the task while it finishes answers that task, never a second one', async () => {
    // The task finishes in a transaction held open; the enqueue's insert meets its row and waits
    // for it. Once that commits, the row it waited on is gone, and the history row it now holds
    // its key from was not in the insert's snapshot.
    for (const racers of [1, 4]) {
      const [made] = await taskInsertMany(t.db, [newTask({ dedupKey: `finishing-${racers}`, dedupTtlMs: 60_000 })]);
      const id = made!.task.id;
      const finisher = new pg.Client(t.url);
      await finisher.connect();
      const dbs = Array.from({ length: racers }, () => openPgDb(t.url, 1));
      try {
        await finisher.query('begin');
        await taskCancel({ query: async (text, params) => (await finisher.query(text, params as unknown[])).rows }, id);
        const enqueues = dbs.map((db) => taskInsertMany(db, [newTask({ dedupKey: `finishing-${racers}` })]));
        await expect
          .poll(async () => (await t.db.query(`select 1 from pg_locks where not granted and locktype = 'transactionid'`)).length)
          .toBe(racers);
        await finisher.query('commit');
        for (const [e] of await Promise.all(enqueues)) expect(e).toMatchObject({ task: { id, status: 'cancelled' }, deduplicated: true });
        const rows = await t.db.query('select id from sluice.all_tasks where dedup_key = $1', [`finishing-${racers}`]);
        expect(rows).toHaveLength(1);
      } finally {
        await finisher.end();
        await Promise.all(dbs.map((db) => db.close()));
      }
    }
  });
});
