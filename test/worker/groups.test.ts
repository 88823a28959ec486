/**
 * Endpoint groups on the real Worker in workerd and on the Node server: a group put by an admin
 * key, a task naming it pushed once to each of its URLs (each its own task, with the same body),
 * the group listed, read and deleted; then a task naming it is a 400 naming `group`.
 */
import { describe, expect, it } from 'vitest';
import { generateApiKey } from '../../src/security/api-keys.ts';
import { apiCall, useNodeBeside, useWorkerFixture, type WorkerFixture } from '../helpers/worker-fixture.ts';

const admin = await generateApiKey('admin', ['admin']);
const vars = (f: WorkerFixture) => ({ SLUICE_API_KEYS: JSON.stringify([...JSON.parse(f.secrets.apiKeysJson), admin.entry]) });
const f = useWorkerFixture(vars);

async function exercise(base: string, name: string) {
  const urls = ['a', 'b', 'c'].map((p) => `${f.endpoint.url}/${name}/${p}`);
  const put = await apiCall(base, admin.key, 'PUT', `/v1/groups/${name}`, { urls });
  expect(put).toMatchObject({ status: 201, body: { name, urls } });

  const enqueued = await apiCall(base, f.secrets.apiKey, 'POST', '/v1/tasks', { group: name, body: { invoice: 9 } });
  expect(enqueued.status).toBe(201);
  const tasks = enqueued.body.tasks as Array<{ id: string; url: string }>;
  expect(tasks.map((t) => t.url)).toEqual(urls);
  await expect.poll(() => f.endpoint.received.filter((p) => p.path.startsWith(`/${name}/`)).length, { timeout: 20_000 }).toBe(3);
  const pushes = f.endpoint.received.filter((p) => p.path.startsWith(`/${name}/`));
  expect(pushes.map((p) => p.path).sort()).toEqual(['a', 'b', 'c'].map((p) => `/${name}/${p}`));
  expect(pushes.map((p) => JSON.parse(p.text))).toEqual(pushes.map(() => ({ invoice: 9 })));
  expect(new Set(pushes.map((p) => p.headers['sluice-task-id'])).size).toBe(3);
  for (const t of tasks) {
    await expect.poll(async () => (await apiCall(base, f.secrets.apiKey, 'GET', `/v1/tasks/${t.id}`)).body.status).toBe('succeeded');
  }

  expect((await apiCall(base, admin.key, 'GET', '/v1/groups')).body).toMatchObject({ groups: [{ name, urls }], next_cursor: null });
  expect((await apiCall(base, admin.key, 'GET', `/v1/groups/${name}`)).body).toMatchObject({ name, urls });
  expect((await apiCall(base, f.secrets.apiKey, 'PUT', `/v1/groups/${name}`, { urls })).status).toBe(403);
  const res = await fetch(`${base}/v1/groups/${name}`, { method: 'DELETE', headers: { authorization: `Bearer ${admin.key}` } });
  expect(res.status).toBe(204);
  const gone = await apiCall(base, f.secrets.apiKey, 'POST', '/v1/tasks', { group: name });
  expect(gone).toMatchObject({ status: 400, body: { issues: [{ path: 'group', message: expect.stringContaining('names no group') }] } });
  const both = await apiCall(base, f.secrets.apiKey, 'POST', '/v1/tasks', { group: name, url: urls[0] });
  expect(both.body.issues).toEqual([{ path: 'group', message: 'give either `url` or `group`, not both' }]);
}

describe('endpoint groups', () => {
  it('on the Worker', async () => {
    await exercise(f.worker.url, 'on-worker');
  }, 60_000);

  describe('on the Node server', () => {
    const side = useNodeBeside(f, vars);
    it('fan out the same', async () => {
      await exercise(side.node.url, 'on-node');
    }, 60_000);
  });
});
