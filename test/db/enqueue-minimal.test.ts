/**
 * `Prefer: return=minimal` on the Node server (real HTTP, real Postgres, a real endpoint): an
 * enqueue answers each task as its id, queue and status, says so in `Preference-Applied`, keeps
 * dedup and all-or-nothing as the whole answer does, and wakes the dispatcher all the same.
 * The Worker's side is in test/worker/worker.test.ts.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { SluiceClient } from '../../src/sdk/client.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, emptyTables, type TestDatabase } from '../helpers/db.ts';
import { startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';

let t: TestDatabase;
let sluice: NodeSluice;
let endpoint: TestEndpoint;
let secrets: TestSecrets;

beforeAll(async () => {
  [t, endpoint, secrets] = await Promise.all([createTestDatabase(), startEndpoint(), makeSecrets()]);
  // Tasks of paused queues stay pending: their dedup keys stay held.
  sluice = await startNodeSluice({
    env: testEnv(secrets, t.url, { SLUICE_QUEUES: JSON.stringify({ held: { paused: true }, other: { paused: true } }) }),
  });
});
afterAll(async () => {
  await sluice?.close();
  await endpoint?.close();
  await t?.drop();
});
beforeEach(async () => {
  await emptyTables(t.db, 'sluice.tasks');
  endpoint.received.length = 0;
  endpoint.reply(() => ({ status: 200, body: 'ok' }));
});

async function post(path: string, body: unknown, prefer: string | null = 'return=minimal') {
  const res = await fetch(`${sluice.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json', ...(prefer ? { prefer } : {}) },
    body: JSON.stringify(body),
  });
  return { status: res.status, applied: res.headers.get('preference-applied'), json: (await res.json()) as Record<string, unknown> };
}

describe('Prefer: return=minimal', () => {
  it('answers a task as its id, queue and status, and the task is pushed', async () => {
    const res = await post('/v1/tasks', { url: `${endpoint.url}/hook`, queue: 'mail', body: { n: 1 } });
    expect(res).toEqual({
      status: 201,
      applied: 'return=minimal',
      json: { id: expect.any(String), queue: 'mail', status: 'pending', deduplicated: false },
    });
    const [push] = await endpoint.waitFor(1);
    expect(push!.text).toBe('{"n":1}');
    expect(push!.headers['sluice-task-id']).toBe(res.json.id);
  });

  it('keeps dedup within a batch and across calls, and answers a hit with 200', async () => {
    const task = { url: `${endpoint.url}/held`, queue: 'held' };
    const batch = await post('/v1/tasks/batch', {
      tasks: [task, { ...task, dedup_key: 'k' }, { ...task, dedup_key: 'k' }, { ...task, queue: 'other', dedup_key: 'k' }],
    });
    expect(batch.status).toBe(201);
    expect(batch.applied).toBe('return=minimal');
    const tasks = batch.json.tasks as Array<Record<string, unknown>>;
    expect(tasks.map((x) => Object.keys(x).sort())).toEqual(Array(4).fill(['deduplicated', 'id', 'queue', 'status']));
    expect(tasks.map((x) => [x.queue, x.deduplicated])).toEqual([
      ['held', false],
      ['held', false],
      ['held', true],
      ['other', false],
    ]);
    expect(tasks[2]!.id).toBe(tasks[1]!.id);
    expect(new Set(tasks.map((x) => x.id)).size).toBe(3);

    const again = await post('/v1/tasks', { ...task, dedup_key: 'k' });
    expect(again).toEqual({
      status: 200,
      applied: 'return=minimal',
      json: { id: tasks[1]!.id, queue: 'held', status: 'pending', deduplicated: true },
    });
  });

  it('writes nothing from a batch with one bad task', async () => {
    const bad = await post('/v1/tasks/batch', { tasks: [{ url: `${endpoint.url}/a` }, { url: `${endpoint.url}/b`, priority: 'high' }] });
    expect(bad.status).toBe(400);
    expect(bad.applied).toBeNull();
    expect(await t.db.query('select 1 from sluice.all_tasks')).toHaveLength(0);
  });

  it('leaves the whole answer to requests that prefer otherwise or say nothing', async () => {
    for (const prefer of [null, 'return=representation', 'respond-async', 'wait=5']) {
      const res = await post('/v1/tasks', { url: `${endpoint.url}/whole` }, prefer);
      expect(res.applied).toBeNull();
      expect(res.json).toMatchObject({ url: `${endpoint.url}/whole`, deduplicated: false });
    }
  });

  it("is the SDK's enqueueBatch(tasks, { minimal: true })", async () => {
    const client = new SluiceClient({ baseUrl: sluice.url, apiKey: secrets.apiKey });
    const refs = await client.enqueueBatch([{ url: `${endpoint.url}/sdk`, queue: 'held' }], { minimal: true });
    expect(refs).toEqual([{ id: expect.any(String), queue: 'held', status: 'pending', deduplicated: false }]);
    const [whole] = await client.enqueueBatch([{ url: `${endpoint.url}/sdk`, queue: 'held' }]);
    expect(whole).toMatchObject({ url: `${endpoint.url}/sdk`, attempts: 0 });
  });
});
