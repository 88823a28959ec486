/**
 * The same example handler (examples/handler.ts) under Node, Bun, Deno and workerd, each
 * receiving real pushes from a running Sluice (the Node server on real Postgres), driven by
 * the SDK client: a quick task, a long task that heartbeats well past its first lease, and a
 * task that fails for good.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/node/postgres.ts';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { SluiceApiError, SluiceClient } from '../../src/sdk/index.ts';
import { makeSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { BIN, ROOT, spawnReady } from '../helpers/process.ts';
import { startUserWorker } from '../helpers/user-worker.ts';

let t: TestDatabase;
let sluice: NodeSluice;
let client: SluiceClient;
let apiKey: string;
const stops: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  t = await createTestDatabase();
  const secrets = await makeSecrets();
  sluice = await startNodeSluice({
    env: testEnv(secrets, t.url, { SLUICE_LEASE_MS: '2000', SLUICE_PUSH_TIMEOUT_MS: '1500', SLUICE_DISPATCH_PARALLELISM: '8' }),
  });
  apiKey = secrets.apiKey;
  client = new SluiceClient({ baseUrl: sluice.url, apiKey });
});
afterAll(async () => {
  await Promise.allSettled(stops.map((stop) => stop()));
  await sluice?.close();
  await t?.drop();
});

/** Starts a runtime's example server and resolves with its base URL. */
async function spawnServer(command: string, args: string[]): Promise<string> {
  const port = await freePort();
  const child = await spawnReady(command, args, { SLUICE_URL: sluice.url, PORT: String(port) }, 'listening on');
  stops.push(async () => child.kill('SIGKILL'));
  return `http://127.0.0.1:${port}`;
}

async function startWorkerd(): Promise<string> {
  const worker = await startUserWorker({ entry: `${ROOT}examples/worker.ts`, bindings: { SLUICE_URL: sluice.url } });
  stops.push(() => worker.close());
  return worker.url;
}

async function settled(id: string, timeoutMs = 20_000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const task = await client.get(id);
    if (['succeeded', 'dead', 'cancelled', 'expired'].includes(task.status)) return task;
    if (Date.now() > end) throw new Error(`task ${id} still ${task.status}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const RUNTIMES: Record<string, () => Promise<string>> = {
  node: () => spawnServer(process.execPath, ['examples/node.ts']),
  bun: () => spawnServer(`${BIN}/bun`, ['examples/bun.ts']),
  deno: () => spawnServer(`${BIN}/deno`, ['run', '--allow-net', '--allow-env', '--allow-read', 'examples/deno.ts']),
  workerd: startWorkerd,
};

describe.each(Object.keys(RUNTIMES))('the example handler on %s', (runtime) => {
  let base: string;
  beforeAll(async () => {
    base = await RUNTIMES[runtime]!();
  }, 60_000);

  it('answers a quick task within the push, and keeps a long one past its lease with heartbeats', async () => {
    const [quick, long, doomed] = await client.enqueueBatch([
      { url: `${base}/quick`, body: { ms: 10 } },
      // 5 s of work on a 2 s lease: heartbeats must keep it, with no second attempt.
      { url: `${base}/long`, body: { ms: 5_000 } },
      { url: `${base}/quick`, body: { fail: 'never' } },
    ]);
    const [q, l, d] = await Promise.all([settled(quick!.id), settled(long!.id), settled(doomed!.id)]);
    expect(q).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(JSON.parse(q.result!)).toEqual({ done: quick!.id, attempt: 1, runtime });
    expect(l).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(JSON.parse(l.result!)).toEqual({ done: long!.id, attempt: 1, runtime });
    expect(l.attempt_history).toEqual([expect.objectContaining({ outcome: 'succeeded', duration_ms: expect.any(Number) })]);
    expect(l.attempt_history[0]!.duration_ms!).toBeGreaterThan(4_500);
    expect(d).toMatchObject({ status: 'dead', attempts: 1, last_status: 422, last_error: 'HTTP 422: this task can never succeed' });
  }, 40_000);
});

describe('the client', () => {
  it('raises typed errors naming the fields', async () => {
    const error = await client.enqueue({ url: 'ftp://nope', priority: 1.5 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SluiceApiError);
    // Every problem in one round, the URL's included.
    expect(error).toMatchObject({
      status: 400,
      code: 'invalid_request',
      issues: [
        { path: 'priority', message: expect.any(String) },
        { path: 'url', message: 'must be https (got ftp:)' },
      ],
    });
    await expect(client.get('424242')).rejects.toMatchObject({ status: 404, code: 'not_found' });
  });

  it('lists, cancels and reads queues', async () => {
    const task = await client.enqueue({ url: 'http://127.0.0.1:9/never', delay_ms: 3_600_000, queue: 'later' });
    expect((await client.list({ queue: 'later' })).tasks.map((x) => x.id)).toEqual([task.id]);
    expect(await client.cancel(task.id)).toMatchObject({ status: 'cancelled' });
    expect((await client.queues.list()).map((q) => q.name)).toContain('later');
    await expect(client.retry(task.id)).rejects.toMatchObject({ status: 409, code: 'not_dead' });
  });

  it('retries through a network fault', async () => {
    let calls = 0;
    const flaky = new SluiceClient({
      baseUrl: sluice.url,
      apiKey,
      backoffMs: 1,
      fetch: async (input, init) => {
        if (++calls === 1) throw new TypeError('fetch failed');
        return fetch(input, init);
      },
    });
    expect(await flaky.list({ limit: 1 })).toMatchObject({ tasks: expect.any(Array) });
    expect(calls).toBe(2);
  });
});
