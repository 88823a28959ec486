/**
 * What a key may see (docs/DESIGN.md §8), over real HTTP on the Node server: a key with only
 * `tasks:write` learns of tasks it did not just create (a dedup hit, a cancel, a redrive) that
 * they exist and their state, never their URL, body, result or errors.
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

beforeAll(async () => {
  const [db, secrets, writer] = await Promise.all([createTestDatabase(), makeSecrets(), generateApiKey('writer', ['tasks:write'])]);
  t = db;
  full = secrets.apiKey;
  writeOnly = writer.key;
  const keys = [...JSON.parse(secrets.apiKeysJson), writer.entry];
  sluice = await startNodeSluice({ env: testEnv(secrets, t.url, { SLUICE_API_KEYS: JSON.stringify(keys) }), dispatch: false });
});
afterAll(async () => {
  await sluice?.close();
  await t?.drop();
});

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
