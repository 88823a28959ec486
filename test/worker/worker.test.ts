/**
 * The real Worker in workerd (Miniflare), with the Neon driver reaching a real Postgres
 * through the WebSocket proxy, pushing over real HTTP to a local endpoint.
 */
import { createHash } from 'node:crypto';
import { createRemoteJWKSet } from 'jose';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { type RunningWorker, startWorker } from '../../src/node/worker-runtime.ts';
import { verifyPush } from '../../src/protocol/signature.ts';
import type { TestSecrets } from '../helpers/config.ts';
import type { TestDatabase } from '../helpers/db.ts';
import { emptyTables } from '../helpers/db.ts';
import type { TestEndpoint } from '../helpers/endpoint.ts';
import { newTask } from '../helpers/tasks.ts';
import { useWorkerFixture } from '../helpers/worker-fixture.ts';

const f = useWorkerFixture((f) => ({ SLUICE_QUEUES: JSON.stringify({ hooks: { url: `${f.endpoint.url}/queue-default` } }) }));
let t: TestDatabase;
let worker: RunningWorker;
let endpoint: TestEndpoint;
let secrets: TestSecrets;
let script: string;
beforeAll(() => {
  ({ t, worker, endpoint, secrets, script } = f);
});
beforeEach(async () => {
  await emptyTables(t.db, 'sluice.tasks');
  endpoint.received.length = 0;
  endpoint.reply(() => ({ status: 200, body: '{"ok":true}' }));
});

function api(path: string, init: RequestInit & { key?: string | null } = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  const key = init.key === undefined ? secrets.apiKey : init.key;
  if (key) headers.set('authorization', `Bearer ${key}`);
  if (init.body !== undefined && !headers.has('content-type')) headers.set('content-type', 'application/json');
  return fetch(`${worker.url}${path}`, { ...init, headers });
}

const post = (path: string, body: unknown, init: RequestInit & { key?: string | null } = {}) =>
  api(path, { method: 'POST', body: JSON.stringify(body), ...init });

async function waitForStatus(id: string, status: string, timeoutMs = 10_000): Promise<Record<string, unknown>> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const task = (await (await api(`/v1/tasks/${id}`)).json()) as Record<string, unknown>;
    if (task.status === status) return task;
    if (Date.now() > until) throw new Error(`task ${id} is ${task.status}, not ${status}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('end to end through the Worker', () => {
  it('enqueue → poke → signed push (verified against the JWKS) → succeeded', async () => {
    const res = await post('/v1/tasks', { url: `${endpoint.url}/hook`, body: { hello: 'world' } });
    expect(res.status).toBe(201);
    const created = (await res.json()) as { id: string; status: string; deduplicated: boolean };
    expect(created).toMatchObject({ status: 'pending', deduplicated: false });

    const [push] = await endpoint.waitFor(1);
    expect(push!.text).toBe('{"hello":"world"}');
    const jwks = createRemoteJWKSet(new URL(`${worker.url}/.well-known/jwks.json`));
    const claims = await verifyPush({
      token: push!.headers['sluice-signature'] as string,
      keys: jwks,
      url: push!.url,
      body: push!.body,
      nowMs: Date.now(),
    });
    expect(claims.sub).toBe(created.id);

    const done = await waitForStatus(created.id, 'succeeded');
    expect(done).toMatchObject({ attempts: 1, result: '{"ok":true}', last_status: 200, lease: null });
  });

  it('the cron trigger (scheduled) gets tasks nobody announced pushed', async () => {
    const [enq] = await taskInsertMany(t.db, [newTask({ url: `${endpoint.url}/cron` })]);
    await worker.scheduled();
    await endpoint.waitFor(1);
    expect(endpoint.received.map((p) => p.path)).toEqual(['/cron']);
    await waitForStatus(enq!.task.id, 'succeeded');
  });

  it("a queue's configured url is used when the task names none", async () => {
    const res = await post('/v1/tasks', { queue: 'hooks', body: 1 });
    expect(res.status).toBe(201);
    const [push] = await endpoint.waitFor(1);
    expect(push!.path).toBe('/queue-default');
  });

  it('a failing endpoint leaves the task pending with its error, to retry', async () => {
    endpoint.reply(() => ({ status: 503, body: 'busy' }));
    const res = await post('/v1/tasks', { url: `${endpoint.url}/hook`, max_attempts: 3 });
    const { id } = (await res.json()) as { id: string };
    await endpoint.waitFor(1);
    const until = Date.now() + 5_000;
    let task: Record<string, unknown> = {};
    while (Date.now() < until) {
      task = (await (await api(`/v1/tasks/${id}`)).json()) as Record<string, unknown>;
      if (task.attempts === 1 && task.status === 'pending') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(task).toMatchObject({ status: 'pending', attempts: 1, last_status: 503, last_error: 'HTTP 503: busy' });
  });
});

describe('leases through the Worker', () => {
  it('an endpoint keeps the lease, heartbeats and completes with its lease token', async () => {
    endpoint.reply(() => ({ status: 202, headers: { 'Sluice-Ack': 'lease' } }));
    const res = await post('/v1/tasks', { url: `${endpoint.url}/long` });
    const { id } = (await res.json()) as { id: string };
    const [push] = await endpoint.waitFor(1);
    const leaseId = push!.headers['sluice-lease-id'] as string;
    const token = push!.headers['sluice-lease-token'] as string;
    await waitForStatus(id, 'leased');
    const beat = await api(`/v1/leases/${leaseId}/heartbeat`, { method: 'POST', key: token, body: JSON.stringify({ extend_ms: 120_000 }) });
    expect(beat.status).toBe(200);
    const done = await api(`/v1/leases/${leaseId}/complete`, { method: 'POST', key: token, body: JSON.stringify({ result: 'done' }) });
    expect(await done.json()).toEqual({ task_id: id, status: 'succeeded' });
    expect(await waitForStatus(id, 'succeeded')).toMatchObject({
      result: 'done',
      attempt_history: [expect.objectContaining({ outcome: 'succeeded' })],
    });
  });
});

describe('the API', () => {
  it('enqueues a batch, all or nothing', async () => {
    const bad = await post('/v1/tasks/batch', { tasks: [{ url: `${endpoint.url}/a` }, { url: `${endpoint.url}/b`, priority: 'high' }] });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { issues: unknown[] }).issues).toEqual([{ path: 'tasks.1.priority', message: expect.any(String) }]);
    expect((await t.db.query('select 1 from sluice.all_tasks')).length).toBe(0);

    const ok = await post('/v1/tasks/batch', {
      tasks: [{ url: `${endpoint.url}/a` }, { url: `${endpoint.url}/b`, dedup_key: 'k' }, { url: `${endpoint.url}/c`, dedup_key: 'k' }],
    });
    expect(ok.status).toBe(201);
    const { tasks } = (await ok.json()) as { tasks: Array<{ id: string; deduplicated: boolean; url: string }> };
    expect(tasks.map((x) => [x.url.slice(-2), x.deduplicated])).toEqual([
      ['/a', false],
      ['/b', false],
      ['/b', true],
    ]);
    expect(tasks[2]!.id).toBe(tasks[1]!.id);
  });

  it('answers each task as its id, queue and status on Prefer: return=minimal, and pushes them', async () => {
    endpoint.reply(() => ({ status: 200, delayMs: 500 }));
    const minimal = { headers: { prefer: 'return=minimal' } };
    const batch = await post(
      '/v1/tasks/batch',
      {
        tasks: [
          { url: `${endpoint.url}/m`, dedup_key: 'm' },
          { url: `${endpoint.url}/m`, dedup_key: 'm' },
        ],
      },
      minimal,
    );
    expect(batch.status).toBe(201);
    expect(batch.headers.get('preference-applied')).toBe('return=minimal');
    const { tasks } = (await batch.json()) as { tasks: Array<Record<string, unknown>> };
    expect(tasks).toEqual([
      { id: expect.any(String), queue: 'default', status: 'pending', deduplicated: false },
      { id: tasks[0]!.id, queue: 'default', status: 'pending', deduplicated: true },
    ]);
    const one = await post('/v1/tasks', { url: `${endpoint.url}/m`, dedup_key: 'm' }, minimal);
    expect(one.status).toBe(200);
    expect(await one.json()).toEqual({
      id: tasks[0]!.id,
      queue: 'default',
      status: expect.stringMatching(/^(pending|leased)$/),
      deduplicated: true,
    });
    await waitForStatus(tasks[0]!.id as string, 'succeeded');
    expect(endpoint.received).toHaveLength(1);
  });

  it('returns the first task for a repeated dedup_key with 200', async () => {
    endpoint.reply(() => ({ status: 200, delayMs: 500 }));
    const first = await post('/v1/tasks', { url: `${endpoint.url}/d`, dedup_key: 'invoice-9' });
    const second = await post('/v1/tasks', { url: `${endpoint.url}/d`, dedup_key: 'invoice-9' });
    expect([first.status, second.status]).toEqual([201, 200]);
    const [a, b] = (await Promise.all([first.json(), second.json()])) as Array<{ id: string; deduplicated: boolean }>;
    expect(b).toMatchObject({ id: a!.id, deduplicated: true });
  });

  it('lists with filters and a cursor, and cancels', async () => {
    const res = await post('/v1/tasks/batch', {
      tasks: [1, 2, 3].map((n) => ({ url: `${endpoint.url}/l`, delay_ms: 3_600_000, body: n, queue: 'later' })),
    });
    const { tasks } = (await res.json()) as { tasks: Array<{ id: string }> };
    const page = (await (await api('/v1/tasks?queue=later&limit=2')).json()) as { tasks: Array<{ id: string }>; next_cursor: string };
    expect(page.tasks.map((x) => x.id)).toEqual([tasks[2]!.id, tasks[1]!.id]);
    const rest = (await (await api(`/v1/tasks?queue=later&limit=2&cursor=${page.next_cursor}`)).json()) as {
      tasks: Array<{ id: string }>;
      next_cursor: null;
    };
    expect(rest).toEqual({ tasks: [expect.objectContaining({ id: tasks[0]!.id })], next_cursor: null });

    const cancelled = await api(`/v1/tasks/${tasks[0]!.id}/cancel`, { method: 'POST' });
    expect(await cancelled.json()).toMatchObject({ status: 'cancelled' });
    const again = await api(`/v1/tasks/${tasks[0]!.id}/cancel`, { method: 'POST' });
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({ code: 'already_finished' });
    const byStatus = (await (await api('/v1/tasks?status=cancelled')).json()) as { tasks: unknown[] };
    expect(byStatus.tasks).toHaveLength(1);
  });

  it('answers every bad request with a 4xx problem naming the cause, and writes nothing', async () => {
    const cases: Array<[Promise<Response>, number, RegExp]> = [
      [post('/v1/tasks', { url: `${endpoint.url}/x` }, { key: null }), 401, /Bearer/],
      [post('/v1/tasks', { url: `${endpoint.url}/x` }, { key: 'sk_sluice_wrong' }), 401, /not valid/],
      [post('/v1/tasks', { url: `${endpoint.url}/x` }, { key: secrets.readKey }), 403, /tasks:write/],
      [post('/v1/tasks', { url: 'ftp://example.com/x' }), 400, /url: must be https/],
      [post('/v1/tasks', { body: 1 }), 400, /url: is required: queue "default" has no default url/],
      [post('/v1/tasks', { url: `${endpoint.url}/x`, delay: 5 }), 400, /delay: is not a known field/],
      [
        post('/v1/tasks', { url: `${endpoint.url}/x`, timeout_ms: 90_000 }),
        400,
        /timeout_ms: the push timeout \(90000 ms\) must be shorter than the lease/,
      ],
      [
        post('/v1/tasks', { url: `${endpoint.url}/x`, headers: { 'Sluice-Task-Id': '1' } }),
        400,
        /headers.Sluice-Task-Id: is set by Sluice/,
      ],
      [post('/v1/tasks', { url: `${endpoint.url}/x`, delay_ms: 5, run_at: '2030-01-01T00:00:00Z' }), 400, /either `delay_ms` or `run_at`/],
      [post('/v1/tasks', { url: `${endpoint.url}/x`, run_at: 'tomorrow' }), 400, /run_at: must be an RFC 3339 timestamp/],
      [post('/v1/tasks', [1, 2]), 400, /expected object/],
      [api('/v1/tasks', { method: 'POST', body: '{"url":' }), 400, /not valid JSON/],
      [api('/v1/tasks', { method: 'POST', body: '' }), 400, /empty/],
      [
        api('/v1/tasks', { method: 'POST', body: 'url=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } }),
        415,
        /application\/json/,
      ],
      [post('/v1/tasks', { url: `${endpoint.url}/x`, body: 'x'.repeat(1_100_000) }), 413, /larger than/],
      [post('/v1/tasks/batch', { tasks: [] }), 400, /tasks: needs at least one task/],
      [api('/v1/tasks/123456789'), 404, /task 123456789 was not found/],
      [api('/v1/tasks/not-an-id'), 404, /was not found/],
      [api('/v1/tasks?status=sleeping'), 400, /status/],
      [api('/v1/tasks?queue=%00'), 400, /queue: must start with a letter or digit/],
      [api('/v1/tasks?concurrency_key=%00'), 400, /concurrency_key: must not contain NUL/],
      [api('/v1/tasks?cursor=garbage'), 400, /cursor: is not a cursor/],
      [api('/v1/nothing-here'), 404, /no route/],
      [post('/v1/tasks', { url: `${endpoint.url}/x`, body_text: 'a\u0000b' }), 400, /body_text: must not contain NUL/],
      [
        api('/v1/tasks', { method: 'POST', body: `{"url":"${endpoint.url}/x","concurrency_key":"\\ud800"}` }),
        400,
        /concurrency_key: must be well-formed Unicode/,
      ],
      [post('/v1/tasks', { url: `${endpoint.url}/x`, headers: { 'x-name': 'café' } }), 400, /headers.x-name: must be printable ASCII/],
      [post('/v1/tasks', { url: `${endpoint.url}/x`, run_at: '0000-01-01T00:00:00Z' }), 400, /run_at: must lie between 2000-01-01/],
      [post('/v1/tasks', { url: `${endpoint.url}/x`, run_at: '9999-12-31T23:59:59-23:59' }), 400, /run_at: must lie between/],
      [
        post('/v1/tasks', { url: `${endpoint.url}/x`, delay_ms: 60_000, ttl_ms: 1_000 }),
        400,
        /ttl_ms: the task would expire before it may run/,
      ],
      [post('/v1/tasks', { url: `${endpoint.url}/x`, delay_ms: 1e300 }), 400, /delay_ms/],
      [
        api('/v1/tasks', { method: 'POST', body: `{"url":"${endpoint.url}/x","body":${'['.repeat(20_000)}${']'.repeat(20_000)}}` }),
        400,
        /body: is nested more than 64 levels deep/,
      ],
      [api(`/v1/tasks/${'9'.repeat(30)}`), 404, /was not found/],
    ];
    for (const [response, status, detail] of cases) {
      const res = await response;
      const problem = (await res.json()) as { status: number; detail: string };
      expect({ status: res.status, detail: problem.detail }).toMatchObject({ status, detail: expect.stringMatching(detail) });
      expect(problem.status).toBe(status);
      expect(res.headers.get('content-type')).toBe('application/problem+json');
    }
    expect((await t.db.query('select 1 from sluice.all_tasks')).length).toBe(0);
  });

  it('reports every problem of a body in one round, the URL included', async () => {
    const res = await post('/v1/tasks', { url: 'ftp://example.com/x', priority: 'high', delay: 5 });
    expect(res.status).toBe(400);
    const { issues } = (await res.json()) as { issues: Array<{ path: string }> };
    expect(issues.map((i) => i.path).sort()).toEqual(['delay', 'priority', 'url']);
    const batch = await post('/v1/tasks/batch', {
      tasks: [{ url: 'https://127.0.0.1.example/ok' }, { url: 'ftp://x/', priority: 'high' }],
    });
    expect(((await batch.json()) as { issues: Array<{ path: string }> }).issues.map((i) => i.path).sort()).toEqual([
      'tasks.1.priority',
      'tasks.1.url',
    ]);
  });

  it('stores the URL in its normalised form (the form signed as aud)', async () => {
    const res = await post('/v1/tasks', { url: `  ${endpoint.url.replace('http', 'HTTP')}`, delay_ms: 3_600_000 });
    expect(res.status).toBe(201);
    expect(((await res.json()) as { url: string }).url).toBe(`${endpoint.url}/`);
  });

  it("shows a task's header names but never their values", async () => {
    const res = await post('/v1/tasks', {
      url: `${endpoint.url}/h`,
      delay_ms: 3_600_000,
      headers: { authorization: 'Bearer secret-token' },
    });
    const { id } = (await res.json()) as { id: string };
    const text = await (await api(`/v1/tasks/${id}`, { key: secrets.readKey })).text();
    expect(JSON.parse(text)).toMatchObject({ header_names: ['authorization'] });
    expect(text).not.toContain('secret-token');
  });

  it('serves the OpenAPI document and a page that renders it, without a key', async () => {
    const doc = (await (await api('/openapi.json', { key: null })).json()) as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(['/v1/tasks', '/v1/leases/{lease_id}/heartbeat', '/v1/queues/{queue}/concurrency']),
    );
    const page = await api('/docs', { key: null });
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect(await page.text()).toContain("fetch('/openapi.json')");
  });

  it('sends security headers: nosniff everywhere, WWW-Authenticate on 401, a hash-pinned CSP on /docs', async () => {
    for (const res of [await api('/healthz', { key: null }), await api('/v1/tasks/1'), await api('/nowhere')]) {
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    }
    const denied = await api('/v1/tasks', { key: null });
    expect(denied.status).toBe(401);
    expect(denied.headers.get('www-authenticate')).toBe('Bearer realm="sluice"');
    const docs = await api('/docs', { key: null });
    const html = await docs.text();
    // The hashes of the page's one inline script and one inline style, taken independently.
    const inline = (tag: string) => {
      const open = html.indexOf(`<${tag}>`) + tag.length + 2;
      return createHash('sha256')
        .update(html.slice(open, html.indexOf(`</${tag}>`, open)))
        .digest('base64');
    };
    const csp = docs.headers.get('content-security-policy') ?? '';
    expect(csp).toContain(`script-src 'sha256-${inline('script')}'`);
    expect(csp).toContain(`style-src 'sha256-${inline('style')}'`);
    expect(csp).toMatch(/default-src 'none'.*connect-src 'self'.*frame-ancestors 'none'/);
  });

  it('serves health and the public JWKS without a key', async () => {
    expect(await (await api('/healthz', { key: null })).json()).toEqual({ status: 'ok' });
    const jwks = (await (await api('/.well-known/jwks.json', { key: null })).json()) as { keys: Array<Record<string, unknown>> };
    expect(jwks.keys).toEqual([expect.objectContaining({ kid: 'test-1', alg: 'EdDSA', use: 'sig' })]);
    expect(jwks.keys[0]).not.toHaveProperty('d');
  });
});

describe('a misconfigured Worker', () => {
  it('answers 500 naming the variables, never the secrets', async () => {
    const broken = await startWorker({ script, vars: { DATABASE_URL: t.url, SLUICE_API_KEYS: '[{"sha256":"nope"' } });
    try {
      const res = await fetch(`${broken.url}/healthz`);
      expect(res.status).toBe(500);
      const text = await res.text();
      expect(text).toMatch(/misconfigured \(SLUICE_API_KEYS, SLUICE_SIGNING_KEYS\)/);
      expect(text).not.toContain('nope');
    } finally {
      await broken.close();
    }
  });
});
