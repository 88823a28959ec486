/**
 * Endpoint groups (migrations/0025_groups.sql) over real HTTP on the Node server: put, read,
 * list and delete a group, each URL checked as a task's url is; an enqueue naming a group made
 * one task per URL, all or none, alone and in place in a batch; and the refusals, each naming
 * what is wrong.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { generateApiKey } from '../../src/security/api-keys.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, emptyTables, type TestDatabase } from '../helpers/db.ts';

let t: TestDatabase;
let secrets: TestSecrets;
let api: NodeSluice;
const admin = await generateApiKey('admin', ['admin']);
const limited = await generateApiKey('limited', ['admin']);

beforeAll(async () => {
  [t, secrets] = await Promise.all([createTestDatabase(), makeSecrets()]);
  const keys = [...JSON.parse(secrets.apiKeysJson), admin.entry, { ...limited.entry, queues: ['billing'] }];
  api = await startNodeSluice({ env: testEnv(secrets, t.url, { SLUICE_API_KEYS: JSON.stringify(keys) }), dispatch: false });
});
afterAll(async () => {
  await api?.close();
  await t?.drop();
});
beforeEach(async () => {
  await emptyTables(t.db, 'sluice.tasks, sluice.lanes, sluice.groups');
});

async function call(method: string, path: string, body?: unknown, key = admin.key, base = api.url) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, json: (text ? JSON.parse(text) : null) as Record<string, unknown> & { issues?: unknown } };
}
const URLS = ['http://127.0.0.1:9/a', 'http://127.0.0.1:9/b', 'http://127.0.0.1:9/c'];
const count = async () => (await t.db.query<{ n: number }>('select count(*)::int as n from sluice.all_tasks'))[0]!.n;

describe('endpoint groups', () => {
  it('are put, read, listed, replaced and deleted by an admin key', async () => {
    const made = await call('PUT', '/v1/groups/fan.out-1', { urls: ['HTTP://127.0.0.1:9/a', URLS[1]] });
    expect(made).toMatchObject({ status: 201, json: { name: 'fan.out-1', urls: ['http://127.0.0.1:9/a', URLS[1]] } });
    expect((await call('PUT', '/v1/groups/other', { urls: [URLS[2]] })).status).toBe(201);
    const replaced = await call('PUT', '/v1/groups/fan.out-1', { urls: URLS });
    expect(replaced).toMatchObject({ status: 200, json: { urls: URLS, created_at: made.json.created_at } });
    expect((await call('GET', '/v1/groups/fan.out-1')).json).toEqual(replaced.json);
    const first = await call('GET', '/v1/groups?limit=1');
    expect(first.json).toMatchObject({ groups: [{ name: 'fan.out-1' }], next_cursor: 'fan.out-1' });
    const rest = await call('GET', '/v1/groups?limit=1&cursor=fan.out-1');
    expect(rest.json).toMatchObject({ groups: [{ name: 'other' }], next_cursor: 'other' });
    expect((await call('DELETE', '/v1/groups/fan.out-1')).status).toBe(204);
    expect((await call('GET', '/v1/groups/fan.out-1')).status).toBe(404);
    expect((await call('DELETE', '/v1/groups/fan.out-1')).status).toBe(404);
  });

  it('refuse a bad name, bad URLs and keys that may not use them, naming the problem', async () => {
    const issues = async (method: string, path: string, body?: unknown) => (await call(method, path, body)).json.issues;
    expect(await issues('PUT', '/v1/groups/-x', { urls: URLS })).toEqual([
      { path: 'name', message: expect.stringContaining('group name') },
    ]);
    expect(await issues('GET', `/v1/groups/${'a'.repeat(129)}`)).toEqual([{ path: 'name', message: expect.any(String) }]);
    expect(await issues('PUT', '/v1/groups/g', { urls: [] })).toEqual([{ path: 'urls', message: 'needs at least one URL' }]);
    const many = Array.from({ length: 101 }, (_, i) => `http://127.0.0.1:9/${i}`);
    expect(await issues('PUT', '/v1/groups/g', { urls: many })).toEqual([{ path: 'urls', message: 'takes at most 100 URLs' }]);
    expect(await issues('PUT', '/v1/groups/g', { urls: URLS, more: 1 })).toEqual([{ path: 'more', message: 'is not a known field' }]);
    expect(await issues('PUT', '/v1/groups/g', { urls: ['ftp://example.com/x', 'not a url', URLS[0], 'HTTP://127.0.0.1:9/a'] })).toEqual([
      { path: 'urls.0', message: 'must be https (got ftp:)' },
      { path: 'urls.1', message: 'is not an absolute URL' },
      { path: 'urls.3', message: 'is urls.2 again (http://127.0.0.1:9/a)' },
    ]);
    expect(await issues('PUT', '/v1/groups/g', { urls: 'http://127.0.0.1:9/a' })).toEqual([{ path: 'urls', message: expect.any(String) }]);
    // A deployment that allows no private targets refuses them in a group as in a task.
    const strict = await startNodeSluice({
      env: testEnv(secrets, t.url, { SLUICE_API_KEYS: JSON.stringify([admin.entry]), SLUICE_ALLOW_PRIVATE_TARGETS: 'false' }),
      dispatch: false,
    });
    try {
      const refused = await call('PUT', '/v1/groups/g', { urls: ['https://10.0.0.5/x', 'https://example.com/x'] }, admin.key, strict.url);
      expect(refused.json.issues).toEqual([{ path: 'urls.0', message: expect.stringContaining('private') }]);
    } finally {
      await strict.close();
    }
    // Admin only; and a group is no queue's, so a key limited to queues may not use the routes.
    expect((await call('PUT', '/v1/groups/g', { urls: URLS }, secrets.apiKey)).status).toBe(403);
    expect((await call('GET', '/v1/groups', undefined, secrets.readKey)).status).toBe(403);
    expect((await call('GET', '/v1/groups', undefined, limited.key)).json).toMatchObject({ status: 403, code: 'queue_not_allowed' });
    expect((await call('GET', '/v1/groups')).json).toEqual({ groups: [], next_cursor: null });
  });

  it('make a task naming one into a task per URL, in one write, alone and in place in a batch', async () => {
    await call('PUT', '/v1/groups/fanout', { urls: URLS });
    const one = await call('POST', '/v1/tasks', { group: 'fanout', body: { order: 7 }, max_attempts: 3 }, secrets.apiKey);
    expect(one.status).toBe(201);
    const tasks = one.json.tasks as Array<{ id: string; url: string; status: string; max_attempts: number; deduplicated: boolean }>;
    expect(tasks.map((x) => [x.url, x.status, x.max_attempts, x.deduplicated])).toEqual(URLS.map((u) => [u, 'pending', 3, false]));
    expect(new Set(tasks.map((x) => x.id)).size).toBe(3);
    const bodies = await t.db.query<{ body: string }>('select body from sluice.tasks order by id');
    expect(bodies.map((r) => JSON.parse(r.body))).toEqual(URLS.map(() => ({ order: 7 })));

    const batch = await call(
      'POST',
      '/v1/tasks/batch',
      { tasks: [{ url: 'http://127.0.0.1:9/first' }, { group: 'fanout', queue: 'q2' }, { url: 'http://127.0.0.1:9/last' }] },
      secrets.apiKey,
    );
    const urls = (batch.json.tasks as Array<{ url: string; queue: string }>).map((x) => [x.url, x.queue]);
    expect(urls).toEqual([['http://127.0.0.1:9/first', 'default'], ...URLS.map((u) => [u, 'q2']), ['http://127.0.0.1:9/last', 'default']]);
    const minimal = await fetch(`${api.url}/v1/tasks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json', prefer: 'return=minimal' },
      body: JSON.stringify({ group: 'fanout' }),
    });
    expect(minimal.status).toBe(201);
    expect(((await minimal.json()) as { tasks: unknown[] }).tasks).toEqual(
      URLS.map(() => ({ id: expect.any(String), queue: 'default', status: 'pending', deduplicated: false })),
    );
    expect(await count()).toBe(3 + 5 + 3);
  });

  it('refuse a group that does not exist, or one with a url, dedup_key or debounce, writing nothing', async () => {
    await call('PUT', '/v1/groups/fanout', { urls: URLS });
    const enqueue = async (body: unknown, path = '/v1/tasks') => (await call('POST', path, body, secrets.apiKey)).json.issues;
    expect(await enqueue({ group: 'nope' })).toEqual([{ path: 'group', message: 'names no group (PUT /v1/groups/nope makes one)' }]);
    expect(await enqueue({ tasks: [{ group: 'fanout' }, { group: 'nope' }] }, '/v1/tasks/batch')).toEqual([
      { path: 'tasks.1.group', message: expect.stringContaining('names no group') },
    ]);
    expect(await enqueue({ group: 'fanout', url: URLS[0] })).toEqual([
      { path: 'group', message: 'give either `url` or `group`, not both' },
    ]);
    expect(await enqueue({ group: 'fanout', dedup_key: 'k' })).toEqual([
      { path: 'dedup_key', message: expect.stringContaining('a group makes one per URL') },
    ]);
    expect(await enqueue({ group: 'fanout', debounce: { key: 'k', period_ms: 1_000 } })).toEqual([
      { path: 'debounce', message: expect.stringContaining('a group makes one per URL') },
    ]);
    expect(await enqueue({ group: 'a/b' })).toEqual([{ path: 'group', message: expect.stringContaining('letter or digit') }]);
    expect(await enqueue({ group: 7 })).toEqual([{ path: 'group', message: expect.any(String) }]);
    // A parent that does not exist: none of the group's tasks is written.
    expect(await enqueue({ group: 'fanout', parent_id: '999999' })).toEqual([
      { path: 'parent_id', message: expect.stringContaining('names no') },
    ]);
    // A batch may hold 1,000 tasks once its groups are made one per URL.
    await call('PUT', '/v1/groups/wide', { urls: Array.from({ length: 100 }, (_, i) => `http://127.0.0.1:9/${i}`) });
    const wide = Array.from({ length: 11 }, () => ({ group: 'wide' }));
    expect(await enqueue({ tasks: wide }, '/v1/tasks/batch')).toEqual([
      { path: 'tasks', message: 'makes 1100 tasks (a group makes one per URL): at most 1000 a request' },
    ]);
    const schedule = await call('POST', '/v1/schedules', { name: 'nightly', cron: '0 3 * * *', task: { group: 'fanout' } }, secrets.apiKey);
    expect(schedule.json.issues).toEqual([{ path: 'task.group', message: expect.stringContaining('one task') }]);
    expect(await count()).toBe(0);
  });
});
