/**
 * What a key may see (docs/DESIGN.md §8), over real HTTP on the Node server: a key with only
 * `tasks:write` learns of tasks it did not just create (a dedup hit, a cancel, a redrive) that
 * they exist and their state, never their URL, body, result or errors; a key limited to queues,
 * nothing of other queues' tasks, with scopes and queue limits together. Every route against a
 * key limited to queues, on both paths: test/worker/queue-scopes.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { generateApiKey } from '../../src/security/api-keys.ts';
import { makeSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';

let t: TestDatabase;
let sluice: NodeSluice;
let full: string;
let writeOnly: string;
/** `tasks:write` only, limited to `ops_*` and `billing`. */
let limitedWriter: string;
/** `tasks:read` only, limited to `ops_*` and `billing`. */
let limitedReader: string;

beforeAll(async () => {
  const [db, secrets, writer, lw, lr] = await Promise.all([
    createTestDatabase(),
    makeSecrets(),
    generateApiKey('writer', ['tasks:write']),
    generateApiKey('limited-writer', ['tasks:write']),
    generateApiKey('limited-reader', ['tasks:read']),
  ]);
  t = db;
  full = secrets.apiKey;
  writeOnly = writer.key;
  limitedWriter = lw.key;
  limitedReader = lr.key;
  const queues = ['ops_*', 'billing'];
  const keys = [...JSON.parse(secrets.apiKeysJson), writer.entry, { ...lw.entry, queues }, { ...lr.entry, queues }];
  sluice = await startNodeSluice({ env: testEnv(secrets, t.url, { SLUICE_API_KEYS: JSON.stringify(keys) }), dispatch: false });
});
afterAll(async () => {
  await sluice?.close();
  await t?.drop();
});

async function read(key: string, path: string) {
  const res = await fetch(`${sluice.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function call(key: string, path: string, body?: unknown) {
  const res = await fetch(`${sluice.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body ?? {}),
  });
  return { status: res.status, text: await res.text() };
}

describe('a key with only tasks:write', () => {
  it('sees only the state of a task it did not just create', async () => {
    const secret = { url: 'http://127.0.0.1:9/hook?token=s3cret', body: { card: '4242' }, dedup_key: 'order-1', delay_ms: 3_600_000 };
    const created = await call(full, '/v1/tasks', secret);
    expect(created.status).toBe(201);
    const { id } = JSON.parse(created.text) as { id: string };

    // Its own new task: the whole view.
    const own = await call(writeOnly, '/v1/tasks', { url: 'http://127.0.0.1:9/own', delay_ms: 3_600_000 });
    expect(JSON.parse(own.text)).toMatchObject({ url: 'http://127.0.0.1:9/own' });

    // A dedup hit on someone else's task: that it exists, and its state.
    for (const hit of [await call(writeOnly, '/v1/tasks', secret), await call(writeOnly, '/v1/tasks/batch', { tasks: [secret] })]) {
      expect(hit.text).not.toMatch(/s3cret|4242/);
    }
    expect(JSON.parse((await call(writeOnly, '/v1/tasks', secret)).text)).toEqual({
      id,
      queue: 'default',
      status: 'pending',
      deduplicated: true,
    });

    const cancelled = await call(writeOnly, `/v1/tasks/${id}/cancel`);
    expect(JSON.parse(cancelled.text)).toEqual({ id, queue: 'default', status: 'cancelled' });

    // A reader still sees everything.
    const read = await fetch(`${sluice.url}/v1/tasks/${id}`, { headers: { authorization: `Bearer ${full}` } });
    expect(await read.text()).toMatch(/s3cret/);
  });
});

describe('keys limited to queues', () => {
  it('see scopes and queues together: a writer sees the state of its own queue’s task only, and nothing of another’s', async () => {
    const secret = { url: 'http://127.0.0.1:9/hook?token=s3cret', body: { card: '4242' }, delay_ms: 3_600_000 };
    const mine = JSON.parse((await call(full, '/v1/tasks', { ...secret, queue: 'billing', dedup_key: 'd' })).text) as { id: string };
    const hit = await call(limitedWriter, '/v1/tasks', { ...secret, queue: 'billing', dedup_key: 'd' });
    expect(JSON.parse(hit.text)).toEqual({ id: mine.id, queue: 'billing', status: 'pending', deduplicated: true });
    // Without tasks:read it may not read even its own queue; with it, only its own queue.
    expect((await read(limitedWriter, `/v1/tasks/${mine.id}`)).status).toBe(403);
    expect((await read(limitedReader, `/v1/tasks/${mine.id}`)).body).toMatchObject({ id: mine.id, url: secret.url });
    const other = JSON.parse((await call(full, '/v1/tasks', { ...secret, queue: 'secret' })).text) as { id: string };
    for (const key of [limitedWriter, limitedReader]) {
      const [cancel, none] = [await call(key, `/v1/tasks/${other.id}/cancel`), await call(key, '/v1/tasks/999999999/cancel')];
      expect(cancel.status).toBe(key === limitedWriter ? 404 : 403);
      if (key === limitedWriter) expect(cancel.text.replace(other.id, '?')).toBe(none.text.replace('999999999', '?'));
    }
    expect((await read(limitedReader, `/v1/tasks/${other.id}`)).status).toBe(404);
    expect((await read(full, `/v1/tasks/${other.id}`)).body).toMatchObject({ status: 'pending' });
    // The scope comes first: a key without tasks:write is refused its scope, whatever the queue.
    expect(JSON.parse((await call(limitedReader, '/v1/tasks', { ...secret, queue: 'secret' })).text)).toMatchObject({ code: 'forbidden' });
  });

  it('list only their queues: a prefix is a prefix, never a LIKE pattern (ops_* takes ops_1, not opsX1)', async () => {
    const parent = JSON.parse(
      (await call(full, '/v1/tasks', { url: 'http://127.0.0.1:9/p', queue: 'ops_a', delay_ms: 3_600_000 })).text,
    ) as {
      id: string;
    };
    for (const queue of ['ops_1', 'opsX1', 'ops', 'billing', 'billing2']) {
      const made = await call(full, '/v1/tasks', { url: 'http://127.0.0.1:9/x', queue, parent_id: parent.id, delay_ms: 3_600_000 });
      expect(made.status).toBe(201);
      const schedule = { name: `s-${queue.replace('_', '-')}`, cron: '0 0 1 1 *', task: { url: 'http://127.0.0.1:9/s', queue } };
      expect((await call(full, '/v1/schedules', schedule)).status).toBe(201);
    }
    const queuesOf = (items: unknown) => [...new Set((items as Array<{ queue: string }>).map((t) => t.queue))].sort();
    expect(queuesOf((await read(limitedReader, '/v1/tasks?limit=500')).body.tasks)).toEqual(['billing', 'ops_1', 'ops_a']);
    expect(queuesOf((await read(limitedReader, `/v1/tasks/${parent.id}/children`)).body.children)).toEqual(['billing', 'ops_1']);
    const schedules = (await read(limitedReader, '/v1/schedules')).body.schedules as Array<{ task: { queue: string } }>;
    expect(queuesOf(schedules.map((s) => s.task))).toEqual(['billing', 'ops_1']);
    const queues = (await read(limitedReader, '/v1/queues')).body.queues as Array<{ name: string }>;
    expect(queues.map((q) => q.name)).toEqual(['billing', 'ops_1', 'ops_a']);
  });
});

describe('bad API keys', () => {
  it('are answered 401 with WWW-Authenticate; after 20 from one address, 429 with Retry-After; a good key still gets in', async () => {
    const statuses: number[] = [];
    let last: Response | null = null;
    for (let i = 0; i < 21; i++) {
      last = await fetch(`${sluice.url}/v1/tasks?limit=1`, { headers: { authorization: `Bearer sk_sluice_guess${i}` } });
      statuses.push(last.status);
      if (i === 0) expect(last.headers.get('www-authenticate')).toBe('Bearer realm="sluice"');
    }
    expect(statuses.slice(0, 20).every((s) => s === 401)).toBe(true);
    expect(statuses[20]).toBe(429);
    expect(Number(last!.headers.get('retry-after'))).toBeGreaterThan(0);
    // Nobody is locked out by someone else's guessing (a proxy or NAT shares one address).
    const good = await fetch(`${sluice.url}/v1/tasks?limit=1`, { headers: { authorization: `Bearer ${full}` } });
    expect(good.status).toBe(200);
  });
});
