/**
 * Keys limited to queues (SLUICE_API_KEYS `queues`, docs/DESIGN.md §8), on the real Worker in
 * workerd and on the Node server: every route of the OpenAPI document that takes an API key is
 * probed with a key limited to `billing`, `reports-*` and `ops_*` (an admin, so that its scopes
 * never stand in the way), against a queue it may use and one it may not. A queue it names is
 * 403 and nothing changes; a task or schedule of another queue is 404, word for word as a
 * missing one; listings hold only its queues. A route added without a probe fails the first test.
 */
import { describe, expect, it } from 'vitest';
import { openApiDocument } from '../../src/api/openapi/document.ts';
import { moveStragglers } from '../../src/db/history.ts';
import { generateApiKey } from '../../src/security/api-keys.ts';
import type { TestDatabase } from '../helpers/db.ts';
import { useNodeBeside, useWorkerFixture, type WorkerFixture } from '../helpers/worker-fixture.ts';

const scoped = await generateApiKey('team', ['admin']);
const root = await generateApiKey('root', ['admin']);
const SCOPE = ['billing', 'reports-*', 'ops_*'];
const vars = (f: WorkerFixture) => ({
  SLUICE_QUEUES: JSON.stringify({ 'reports-pull': { pull: true }, 'secret-pull': { pull: true } }),
  SLUICE_API_KEYS: JSON.stringify([...JSON.parse(f.secrets.apiKeysJson), root.entry, { ...scoped.entry, queues: SCOPE }]),
});
const f = useWorkerFixture(vars);

/** Pending for an hour: nothing pushes them while the probes run. */
const LATER = { url: 'http://127.0.0.1:9/hook', delay_ms: 3_600_000 };
const YEARLY = '0 0 1 1 *';

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

interface Probe {
  base: string;
  db: TestDatabase['db'];
  /** A call with the limited key (or `key`). */
  call(method: string, path: string, body?: unknown, key?: string): Promise<Answer>;
  /** A call with an admin key of every queue. */
  root(method: string, path: string, body?: unknown): Promise<Answer>;
  /** A pending task of `queue` (made with the root key), and its id. */
  task(queue: string, extra?: Record<string, unknown>): Promise<string>;
  /** A dead task of `queue`, in history as any dead task is. */
  dead(queue: string, extra?: Record<string, unknown>): Promise<string>;
  status(id: string): Promise<string>;
}

function probeOn(base: string, db: TestDatabase['db']): Probe {
  const call = async (method: string, path: string, body?: unknown, key = scoped.key): Promise<Answer> => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text && res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : { text } };
  };
  const root_ = (method: string, path: string, body?: unknown) => call(method, path, body, root.key);
  const task = async (queue: string, extra: Record<string, unknown> = {}) => {
    const made = await root_('POST', '/v1/tasks', { ...LATER, queue, ...extra });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    return made.body.id as string;
  };
  return {
    base,
    db,
    call,
    root: root_,
    task,
    async dead(queue, extra) {
      const id = await task(queue, extra);
      await db.query(`update sluice.tasks set status = 'dead', finished_at = now(), attempts = 1 where id = $1`, [id]);
      await moveStragglers(db, 10);
      return id;
    },
    async status(id) {
      const [row] = await db.query<{ status: string }>('select status from sluice.all_tasks where id = $1', [id]);
      return row?.status ?? 'missing';
    },
  };
}

/** 403 `queue_not_allowed`, naming the key's queues. */
function refused(answer: Answer, what: string) {
  expect({ status: answer.status, code: answer.body.code }, what).toEqual({ status: 403, code: 'queue_not_allowed' });
  expect(answer.body.detail, what).toMatch(/^this API key is limited to the queues billing, reports-\*, ops_\*/);
}

/** A ready task of the pull queue the limited key may use, and one of another pull queue. */
const pullable = (p: Probe) =>
  Promise.all([p.task('reports-pull', { url: undefined, delay_ms: 0 }), p.task('secret-pull', { url: undefined, delay_ms: 0 })]);

/** The answer for a task or schedule of another queue is, but for its name, the answer for one that does not exist. */
async function hidden(answerFor: (name: string) => Promise<Answer>, name: string, missing: string, status = 404) {
  const [other, none] = await Promise.all([answerFor(name), answerFor(missing)]);
  const named = (answer: Answer, text: string) => JSON.stringify(answer.body).replace(new RegExp(`\\b${text}\\b`, 'g'), '?');
  expect([other.status, none.status], name).toEqual([status, status]);
  expect(named(other, name), name).toBe(named(none, missing));
}

const MISSING = '999999999';
/** The queues the limited key may use, as a regular expression. */
const OURS = /^(billing|reports-.*|ops_.*)$/;

/** Per "METHOD /path" of the OpenAPI document: what a limited key meets there. */
const PROBES: Record<string, (p: Probe) => Promise<void>> = {
  'POST /v1/tasks': async (p) => {
    const count = async () => (await p.db.query<{ n: number }>('select count(*)::int as n from sluice.all_tasks'))[0]!.n;
    const before = await count();
    expect((await p.call('POST', '/v1/tasks', { ...LATER, queue: 'billing' })).status).toBe(201);
    expect((await p.call('POST', '/v1/tasks', { ...LATER, queue: 'reports-eu' })).status).toBe(201);
    expect((await p.call('POST', '/v1/tasks', { ...LATER, queue: 'ops_1' })).status).toBe(201);
    // Elsewhere 403, the default queue included, and before anything of that queue is looked at:
    // no url, no default url, is still 403, not the 400 that would tell whether the queue has one.
    for (const queue of ['secret', 'reports', 'billing2', 'opsX1']) {
      refused(await p.call('POST', '/v1/tasks', { ...LATER, queue }), queue);
    }
    refused(await p.call('POST', '/v1/tasks', LATER), 'default');
    refused(await p.call('POST', '/v1/tasks', { queue: 'secret', body: 1 }), 'no url');
    expect(await count()).toBe(before + 3);
    // A dedup hit is of the same queue: a limited key's hit is of its own queue.
    const first = await p.root('POST', '/v1/tasks', { ...LATER, queue: 'billing', dedup_key: 'invoice-1' });
    const hit = await p.call('POST', '/v1/tasks', { ...LATER, queue: 'billing', dedup_key: 'invoice-1' });
    expect([hit.status, hit.body.id, hit.body.deduplicated]).toEqual([200, first.body.id, true]);
    await p.root('POST', '/v1/tasks', { ...LATER, queue: 'secret', dedup_key: 'invoice-2' });
    refused(await p.call('POST', '/v1/tasks', { ...LATER, queue: 'secret', dedup_key: 'invoice-2' }), 'dedup elsewhere');
    // A parent of another queue is no parent, word for word as one that does not exist.
    const parent = await p.task('secret');
    await hidden((id) => p.call('POST', '/v1/tasks', { ...LATER, queue: 'billing', parent_id: id }), parent, MISSING, 400);
    const own = await p.task('billing');
    expect((await p.call('POST', '/v1/tasks', { ...LATER, queue: 'billing', parent_id: own })).status).toBe(201);
  },
  'POST /v1/tasks/batch': async (p) => {
    const count = async () => (await p.db.query<{ n: number }>('select count(*)::int as n from sluice.all_tasks'))[0]!.n;
    const before = await count();
    const batch = await p.call('POST', '/v1/tasks/batch', {
      tasks: [
        { ...LATER, queue: 'billing' },
        { ...LATER, queue: 'secret' },
        { ...LATER, queue: 'reports-eu' },
        { ...LATER, queue: 'reports' },
        { ...LATER, queue: 'billing', bogus: true },
      ],
    });
    refused(batch, 'batch');
    expect(batch.body.issues).toEqual([
      { path: 'tasks.1.queue', message: 'is secret, a queue this API key may not use' },
      { path: 'tasks.3.queue', message: 'is reports, a queue this API key may not use' },
    ]);
    expect(await count()).toBe(before);
    const ok = await p.call('POST', '/v1/tasks/batch', {
      tasks: [
        { ...LATER, queue: 'billing' },
        { ...LATER, queue: 'reports-x' },
      ],
    });
    expect(ok.status).toBe(201);
    expect(await count()).toBe(before + 2);
  },
  'GET /v1/tasks': async (p) => {
    await p.task('secret');
    await p.task('billing');
    await p.dead('secret');
    await p.dead('billing');
    // Page by page, one task a page: no page holds another queue's task.
    const seen = new Set<string>();
    let cursor: string | null = '';
    while (cursor !== null) {
      const page = await p.call('GET', `/v1/tasks?limit=1${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.status).toBe(200);
      for (const t of page.body.tasks as Array<{ queue: string }>) seen.add(t.queue);
      cursor = page.body.next_cursor as string | null;
    }
    expect(seen).toContain('billing');
    expect([...seen].filter((q) => !OURS.test(q))).toEqual([]);
    const dead = await p.call('GET', '/v1/tasks?status=dead');
    expect((dead.body.tasks as Array<{ queue: string }>).map((t) => t.queue)).toEqual(['billing']);
    const billing = await p.call('GET', '/v1/tasks?queue=billing&limit=500');
    expect(new Set((billing.body.tasks as Array<{ queue: string }>).map((t) => t.queue))).toEqual(new Set(['billing']));
    // Another queue named: 403, decided from the key alone (an empty page would pass for an empty queue).
    refused(await p.call('GET', '/v1/tasks?queue=secret'), 'list secret');
    refused(await p.call('GET', '/v1/tasks?queue=nothing-here'), 'list unknown');
  },
  'GET /v1/tasks/{id}': async (p) => {
    const [mine, other, dead] = await Promise.all([p.task('billing'), p.task('secret'), p.dead('secret')]);
    expect((await p.call('GET', `/v1/tasks/${mine}`)).body).toMatchObject({ id: mine, queue: 'billing' });
    await hidden((id) => p.call('GET', `/v1/tasks/${id}`), other, MISSING);
    await hidden((id) => p.call('GET', `/v1/tasks/${id}`), dead, MISSING);
  },
  'GET /v1/tasks/{id}/children': async (p) => {
    const parent = await p.task('billing');
    const [child] = [await p.task('billing', { parent_id: parent }), await p.task('secret', { parent_id: parent })];
    const children = await p.call('GET', `/v1/tasks/${parent}/children`);
    expect((children.body.children as Array<{ id: string }>).map((c) => c.id)).toEqual([child]);
    expect(((await p.root('GET', `/v1/tasks/${parent}/children`)).body.children as unknown[]).length).toBe(2);
    const otherParent = await p.task('secret');
    await hidden((id) => p.call('GET', `/v1/tasks/${id}/children`), otherParent, MISSING);
  },
  'POST /v1/tasks/{id}/cancel': async (p) => {
    const [mine, other] = await Promise.all([p.task('billing'), p.task('secret')]);
    await hidden((id) => p.call('POST', `/v1/tasks/${id}/cancel`), other, MISSING);
    expect(await p.status(other)).toBe('pending');
    expect((await p.call('POST', `/v1/tasks/${mine}/cancel`)).body).toMatchObject({ id: mine, status: 'cancelled' });
  },
  'POST /v1/tasks/{id}/retry': async (p) => {
    const [mine, other] = await Promise.all([p.dead('billing'), p.dead('secret')]);
    await hidden((id) => p.call('POST', `/v1/tasks/${id}/retry`), other, MISSING);
    expect(await p.status(other)).toBe('dead');
    expect((await p.call('POST', `/v1/tasks/${mine}/retry`)).body).toMatchObject({ id: mine, status: 'pending' });
  },
  'POST /v1/tasks/redrive': async (p) => {
    // Dead tasks of one URL prefix in two queues: the limited key sees, counts and redrives its own only.
    const url = 'http://127.0.0.1:9/replayed/';
    const [mine, other] = [await p.dead('billing', { url: `${url}1` }), await p.dead('secret', { url: `${url}2` })];
    const count = async (body: Record<string, unknown>, call = p.call) =>
      (await call('POST', '/v1/tasks/redrive', { ...body, url_prefix: url, dry_run: true })).body.matched;
    expect([await count({}), await count({}, p.root)]).toEqual([1, 2]);
    expect(await count({ queue: 'billing' })).toBe(1);
    refused(await p.call('POST', '/v1/tasks/redrive', { queue: 'secret', url_prefix: url }), 'redrive secret');
    refused(await p.call('POST', '/v1/tasks/redrive', { queue: 'nothing-here', dry_run: true }), 'redrive unknown');
    expect(await p.status(other)).toBe('dead');
    expect((await p.call('POST', '/v1/tasks/redrive', { url_prefix: url })).body).toMatchObject({ matched: 1, redriven: 1, more: false });
    // Redriven, it is due at once: a dispatcher may have leased it already.
    expect(['pending', 'leased']).toContain(await p.status(mine));
    expect(await p.status(other)).toBe('dead');
  },
  'GET /v1/endpoints': async (p) => {
    // An origin is no one queue's: its health tells of every queue's pushes to it.
    refused(await p.call('GET', '/v1/endpoints'), 'endpoints');
    expect((await p.root('GET', '/v1/endpoints')).status).toBe(200);
  },
  'POST /v1/endpoints/{origin}/pause': async (p) => {
    const origin = encodeURIComponent('https://paused.example');
    refused(await p.call('POST', `/v1/endpoints/${origin}/pause`), 'pause endpoint');
    expect(await p.db.query(`select 1 from sluice.endpoints where origin = 'https://paused.example'`)).toEqual([]);
    expect((await p.root('POST', `/v1/endpoints/${origin}/pause`)).body).toMatchObject({ state: 'paused', paused_by: 'hand' });
  },
  'POST /v1/endpoints/{origin}/resume': async (p) => {
    const origin = encodeURIComponent('https://paused.example');
    await p.root('POST', `/v1/endpoints/${origin}/pause`);
    refused(await p.call('POST', `/v1/endpoints/${origin}/resume`), 'resume endpoint');
    const [row] = await p.db.query<{ paused_by: string | null }>(
      `select paused_by from sluice.endpoints where origin = 'https://paused.example'`,
    );
    expect(row?.paused_by).toBe('hand');
    expect((await p.root('POST', `/v1/endpoints/${origin}/resume`)).body).toMatchObject({ state: 'healthy' });
  },
  // A group is no queue's: its URLs receive tasks of any queue. Refused, and nothing changed.
  'GET /v1/groups': async (p) => {
    refused(await p.call('GET', '/v1/groups'), 'groups');
    expect((await p.root('GET', '/v1/groups')).status).toBe(200);
  },
  'GET /v1/groups/{name}': async (p) => {
    await p.root('PUT', '/v1/groups/fanout-read', { urls: [`${p.base}/a`] });
    refused(await p.call('GET', '/v1/groups/fanout-read'), 'group');
    expect((await p.root('GET', '/v1/groups/fanout-read')).status).toBe(200);
  },
  'PUT /v1/groups/{name}': async (p) => {
    refused(await p.call('PUT', '/v1/groups/fanout-put', { urls: [`${p.base}/a`] }), 'put group');
    expect(await p.db.query(`select 1 from sluice.groups where name = 'fanout-put'`)).toEqual([]);
    expect((await p.root('PUT', '/v1/groups/fanout-put', { urls: [`${p.base}/a`] })).status).toBe(201);
  },
  'DELETE /v1/groups/{name}': async (p) => {
    await p.root('PUT', '/v1/groups/fanout-delete', { urls: [`${p.base}/a`] });
    refused(await p.call('DELETE', '/v1/groups/fanout-delete'), 'delete group');
    expect(await p.db.query(`select 1 from sluice.groups where name = 'fanout-delete'`)).toEqual([{ '?column?': 1 }]);
  },
  'GET /v1/queues': async (p) => {
    await p.task('secret');
    const names = ((await p.call('GET', '/v1/queues')).body.queues as Array<{ name: string }>).map((q) => q.name);
    expect(names).toContain('billing');
    expect(names).toContain('reports-pull');
    expect(names.filter((n) => !OURS.test(n))).toEqual([]);
    const all = ((await p.root('GET', '/v1/queues')).body.queues as Array<{ name: string }>).map((q) => q.name);
    expect(all).toEqual(expect.arrayContaining(['secret', 'secret-pull', 'billing']));
  },
  'GET /v1/queues/{queue}': async (p) => {
    expect((await p.call('GET', '/v1/queues/billing')).body).toMatchObject({ name: 'billing' });
    refused(await p.call('GET', '/v1/queues/secret'), 'describe');
  },
  'PUT /v1/queues/{queue}': async (p) => {
    expect((await p.call('PUT', '/v1/queues/billing', { concurrency: 5 })).status).toBe(200);
    refused(await p.call('PUT', '/v1/queues/secret', { concurrency: 5 }), 'override');
    expect((await p.root('GET', '/v1/queues/secret')).body.concurrency).toMatchObject({ source: 'default' });
  },
  'DELETE /v1/queues/{queue}': async (p) => {
    await p.root('PUT', '/v1/queues/secret', { concurrency: 3 });
    refused(await p.call('DELETE', '/v1/queues/secret'), 'reset');
    expect((await p.root('GET', '/v1/queues/secret')).body.concurrency).toEqual({ value: 3, source: 'override' });
    expect((await p.call('DELETE', '/v1/queues/billing')).status).toBe(200);
  },
  'POST /v1/queues/{queue}/pause': async (p) => {
    refused(await p.call('POST', '/v1/queues/secret/pause'), 'pause');
    expect((await p.root('GET', '/v1/queues/secret')).body.paused).toMatchObject({ value: false });
    expect((await p.call('POST', '/v1/queues/billing/pause')).body.paused).toMatchObject({ value: true });
  },
  'POST /v1/queues/{queue}/resume': async (p) => {
    await p.root('POST', '/v1/queues/secret/pause');
    refused(await p.call('POST', '/v1/queues/secret/resume'), 'resume');
    expect((await p.root('GET', '/v1/queues/secret')).body.paused).toMatchObject({ value: true });
    expect((await p.call('POST', '/v1/queues/billing/resume')).body.paused).toMatchObject({ value: false });
  },
  'POST /v1/queues/{queue}/lease': async (p) => {
    const [mine, other] = await pullable(p);
    refused(await p.call('POST', '/v1/queues/secret-pull/lease', {}), 'pull');
    expect(await p.status(other)).toBe('pending');
    const pulled = await p.call('POST', '/v1/queues/reports-pull/lease', {});
    expect((pulled.body.tasks as Array<{ id: string }>).map((t) => t.id)).toEqual([mine]);
  },
  'GET /v1/queues/{queue}/concurrency': async (p) => {
    expect((await p.call('GET', '/v1/queues/billing/concurrency')).body).toMatchObject({ queue: 'billing' });
    refused(await p.call('GET', '/v1/queues/secret/concurrency'), 'concurrency');
  },
  'PUT /v1/queues/{queue}/keys/{key}': async (p) => {
    expect((await p.call('PUT', '/v1/queues/billing/keys/acme', { limit: 2 })).status).toBe(200);
    refused(await p.call('PUT', '/v1/queues/secret/keys/acme', { limit: 2 }), 'key limit');
    expect(await p.db.query("select 1 from sluice.key_limits where queue = 'secret'")).toEqual([]);
  },
  'DELETE /v1/queues/{queue}/keys/{key}': async (p) => {
    await p.root('PUT', '/v1/queues/secret/keys/acme', { limit: 2 });
    refused(await p.call('DELETE', '/v1/queues/secret/keys/acme'), 'drop key limit');
    expect(await p.db.query("select 1 from sluice.key_limits where queue = 'secret'")).toHaveLength(1);
    expect((await p.call('DELETE', '/v1/queues/billing/keys/acme')).status).toBe(204);
  },
  'POST /v1/queues/{queue}/leases/{lease_id}/release': async (p) => {
    const [mine, other] = await pullable(p);
    const lease = async (queue: string) =>
      ((await p.root('POST', `/v1/queues/${queue}/lease`, { max: 10 })).body.tasks as Array<{ id: string; lease: { id: string } }>).find(
        (t) => t.id === (queue === 'secret-pull' ? other : mine),
      )!.lease.id;
    const [myLease, otherLease] = [await lease('reports-pull'), await lease('secret-pull')];
    refused(await p.call('POST', `/v1/queues/secret-pull/leases/${otherLease}/release`), 'release');
    expect(await p.status(other)).toBe('leased');
    expect((await p.call('POST', `/v1/queues/reports-pull/leases/${myLease}/release`)).body).toMatchObject({
      released: true,
      task_id: mine,
    });
  },
  'POST /v1/schedules': async (p) => {
    const schedule = (name: string, task: Record<string, unknown>) => ({ name, cron: YEARLY, task: { url: LATER.url, ...task } });
    expect((await p.call('POST', '/v1/schedules', schedule('billing-yearly', { queue: 'billing' }))).status).toBe(201);
    const other = await p.call('POST', '/v1/schedules', schedule('secret-yearly', { queue: 'secret' }));
    refused(other, 'schedule');
    expect(other.body.issues).toEqual([{ path: 'task.queue', message: 'is secret, a queue this API key may not use' }]);
    refused(await p.call('POST', '/v1/schedules', schedule('default-yearly', {})), 'schedule default');
    expect((await p.root('GET', '/v1/schedules/secret-yearly')).status).toBe(404);
  },
  'GET /v1/schedules': async (p) => {
    await p.root('POST', '/v1/schedules', { name: 'secret-list', cron: YEARLY, task: { url: LATER.url, queue: 'secret' } });
    await p.root('POST', '/v1/schedules', { name: 'reports-list', cron: YEARLY, task: { url: LATER.url, queue: 'reports-eu' } });
    const names = ((await p.call('GET', '/v1/schedules?limit=500')).body.schedules as Array<{ name: string; task: { queue: string } }>).map(
      (s) => s.task.queue,
    );
    expect(names).toContain('reports-eu');
    expect(names.filter((q) => !OURS.test(q))).toEqual([]);
  },
  'GET /v1/schedules/{name}': async (p) => {
    await p.root('POST', '/v1/schedules', { name: 'secret-get', cron: YEARLY, task: { url: LATER.url, queue: 'secret' } });
    await hidden((name) => p.call('GET', `/v1/schedules/${name}`), 'secret-get', 'nothing-get');
    expect((await p.call('GET', '/v1/schedules/reports-list')).status).toBe(200);
  },
  'DELETE /v1/schedules/{name}': async (p) => {
    await p.root('POST', '/v1/schedules', { name: 'secret-delete', cron: YEARLY, task: { url: LATER.url, queue: 'secret' } });
    await hidden((name) => p.call('DELETE', `/v1/schedules/${name}`), 'secret-delete', 'nothing-delete');
    expect((await p.root('GET', '/v1/schedules/secret-delete')).status).toBe(200);
    await p.root('POST', '/v1/schedules', { name: 'billing-delete', cron: YEARLY, task: { url: LATER.url, queue: 'billing' } });
    expect((await p.call('DELETE', '/v1/schedules/billing-delete')).status).toBe(204);
  },
  'POST /v1/schedules/{name}/pause': async (p) => {
    await p.root('POST', '/v1/schedules', { name: 'secret-pause', cron: YEARLY, task: { url: LATER.url, queue: 'secret' } });
    await hidden((name) => p.call('POST', `/v1/schedules/${name}/pause`), 'secret-pause', 'nothing-pause');
    expect((await p.root('GET', '/v1/schedules/secret-pause')).body.paused).toBe(false);
    expect((await p.call('POST', '/v1/schedules/reports-list/pause')).body.paused).toBe(true);
  },
  'POST /v1/schedules/{name}/resume': async (p) => {
    await p.root('POST', '/v1/schedules', { name: 'secret-resume', cron: YEARLY, paused: true, task: { url: LATER.url, queue: 'secret' } });
    await hidden((name) => p.call('POST', `/v1/schedules/${name}/resume`), 'secret-resume', 'nothing-resume');
    expect((await p.root('GET', '/v1/schedules/secret-resume')).body.paused).toBe(true);
    expect((await p.call('POST', '/v1/schedules/reports-list/resume')).body.paused).toBe(false);
  },
  'GET /v1/webhooks/secret': async (p) => {
    // An endpoint is no one queue's: its secret would sign pushes of every queue's tasks to it.
    refused(await p.call('GET', `/v1/webhooks/secret?url=${encodeURIComponent('https://example.com/hook')}`), 'webhook secret');
    expect((await p.root('GET', `/v1/webhooks/secret?url=${encodeURIComponent('https://example.com/hook')}`)).status).toBe(409);
  },
  'GET /v1/webhooks/forwarding': async (p) => {
    // Names no queue and shows no task: a limited pull key gets what verifies its own forwarded pushes.
    const url = 'http://localhost:3000/task';
    expect((await p.call('GET', `/v1/webhooks/forwarding?url=${encodeURIComponent(url)}`)).body).toMatchObject({ url });
  },
  'GET /metrics': async (p) => {
    // A scrape shows every queue and the cluster's totals.
    refused(await p.call('GET', '/metrics'), 'metrics');
    expect((await p.root('GET', '/metrics')).status).toBe(200);
  },
};

/** Every operation of the OpenAPI document that takes an API key, as "METHOD /path". */
function keyedOperations(): string[] {
  const doc = openApiDocument() as { paths: Record<string, Record<string, { security?: Array<Record<string, unknown>> }>> };
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method, op]) => method !== 'parameters' && op.security?.some((s) => 'apiKey' in s))
      .map(([method]) => `${method.toUpperCase()} ${path}`),
  );
}

async function exercise(base: string, db: TestDatabase['db']) {
  const p = probeOn(base, db);
  for (const [route, probe] of Object.entries(PROBES)) {
    try {
      await probe(p);
    } catch (error) {
      throw new Error(`${route}: ${(error as Error).message}`, { cause: error });
    }
  }
  // The dashboard shows every queue: a limited admin key may not sign in.
  const login = await fetch(`${base}/dashboard/login`, {
    method: 'POST',
    headers: { origin: base, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ key: scoped.key }),
  });
  expect(login.status).toBe(403);
  expect(await login.text()).toContain('is limited to queues');
  expect(login.headers.get('set-cookie')).toBe(null);
}

describe('keys limited to queues', () => {
  it('every route that takes an API key is probed', () => {
    expect(Object.keys(PROBES).sort()).toEqual(keyedOperations().sort());
  });

  it('on the Worker', async () => {
    await exercise(f.worker.url, f.t.db);
  }, 120_000);

  describe('on the Node server', () => {
    const side = useNodeBeside(f, vars);
    it('hold the same', async () => {
      await exercise(side.node.url, side.t.db);
    }, 120_000);
  });
});
