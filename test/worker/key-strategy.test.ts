/**
 * A queue's `key_strategy` through the API, on the real Worker in workerd and on the Node server:
 * from SLUICE_QUEUES and overridden at run time, shown by the queue's views, a bad value a 400
 * naming it; a leased task `cancel_in_progress` ends answers its holder 409 `cancelled` and frees
 * its key's slot at once; `cancel_newest` answers 200 `skipped`; `replace_pending` leaves the
 * running task be. A pull queue holds the leases, so no dispatcher's timing is involved.
 */
import { describe, expect, it } from 'vitest';
import { generateApiKey } from '../../src/security/api-keys.ts';
import type { TestDatabase } from '../helpers/db.ts';
import { apiCall, useNodeBeside, useWorkerFixture, type WorkerFixture } from '../helpers/worker-fixture.ts';

const admin = await generateApiKey('admin', ['admin', 'tasks:read', 'tasks:write']);
const vars = (f: WorkerFixture) => ({
  SLUICE_QUEUES: JSON.stringify({ jobs: { pull: true, key_concurrency: 1, key_strategy: 'cancel_in_progress' } }),
  SLUICE_API_KEYS: JSON.stringify([...JSON.parse(f.secrets.apiKeysJson), admin.entry]),
});
const f = useWorkerFixture(vars);

interface Pulled {
  id: string;
  lease: { id: string; token: string };
}

async function exercise(base: string, db: TestDatabase['db']) {
  const call = (method: string, path: string, body?: unknown) => apiCall(base, admin.key, method, path, body);
  const enqueue = (key: string) => call('POST', '/v1/tasks', { queue: 'jobs', concurrency_key: key, body: { key } });
  const pull = async () =>
    ((await apiCall(base, f.secrets.pullKey, 'POST', '/v1/queues/jobs/lease', { max: 5 })).body.tasks as Pulled[]) ?? [];

  // Shown with its source; a bad value is a 400 naming the field.
  expect((await call('GET', '/v1/queues/jobs')).body.key_strategy).toEqual({ value: 'cancel_in_progress', source: 'env' });
  expect((await call('GET', '/v1/queues/jobs/concurrency')).body.key_strategy).toEqual({ value: 'cancel_in_progress', source: 'env' });
  const bad = await call('PUT', '/v1/queues/jobs', { key_strategy: 'cancel_oldest' });
  expect(bad.status).toBe(400);
  expect(bad.body.issues).toEqual([{ path: 'key_strategy', message: expect.any(String) }]);

  // cancel_in_progress: the leased task ends at once; its holder hears 409 cancelled; the new one is leased now.
  const a = await enqueue('k');
  expect(a.status).toBe(201);
  const [held] = await pull();
  expect(held!.id).toBe(a.body.id);
  const b = await enqueue('k');
  expect(b.status).toBe(201);
  expect((await call('GET', `/v1/tasks/${a.body.id}`)).body.status).toBe('cancelled');
  for (const op of ['heartbeat', 'complete']) {
    const refused = await apiCall(base, held!.lease.token, 'POST', `/v1/leases/${held!.lease.id}/${op}`, {});
    expect([op, refused.status, refused.body.code]).toEqual([op, 409, 'cancelled']);
  }
  const [next] = await pull();
  expect(next?.id).toBe(b.body.id);

  // cancel_newest, by a run-time override: nothing is made, the unfinished task answers.
  const set = await call('PUT', '/v1/queues/jobs', { key_strategy: 'cancel_newest' });
  expect(set.body.key_strategy).toEqual({ value: 'cancel_newest', source: 'override' });
  const skipped = await enqueue('k');
  expect(skipped.status).toBe(200);
  expect(skipped.body).toMatchObject({ id: b.body.id, status: 'leased', skipped: true, deduplicated: false });
  const batch = await call('POST', '/v1/tasks/batch', {
    tasks: [
      { queue: 'jobs', concurrency_key: 'z' },
      { queue: 'jobs', concurrency_key: 'z' },
    ],
  });
  expect(batch.status).toBe(201);
  const [first, second] = batch.body.tasks as Array<{ id: string; skipped?: boolean }>;
  expect(first!.skipped).toBeUndefined();
  expect(second).toMatchObject({ id: first!.id, skipped: true });

  // replace_pending: the pending one is replaced, the leased one keeps running.
  await call('PUT', '/v1/queues/jobs', { key_strategy: 'replace_pending' });
  const d = await enqueue('k');
  const e = await enqueue('k');
  const states = await db.query<{ id: string; status: string }>(
    `select id::text as id, status from sluice.all_tasks where id = any($1::bigint[]) order by id`,
    [[b.body.id, d.body.id, e.body.id]],
  );
  expect(states.map((s) => s.status)).toEqual(['leased', 'cancelled', 'pending']);
  expect((await call('DELETE', '/v1/queues/jobs')).body.key_strategy).toEqual({ value: 'cancel_in_progress', source: 'env' });
}

describe('key_strategy', () => {
  it('on the Worker', async () => {
    await exercise(f.worker.url, f.t.db);
  }, 60_000);

  describe('on the Node server', () => {
    const side = useNodeBeside(f, vars);
    it('holds the same', async () => {
      await exercise(side.node.url, side.t.db);
    }, 60_000);
  });
});
