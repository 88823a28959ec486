/**
 * `sluice listen --queue Q --forward-to URL` (src/cli/commands/listen.ts), the real bin, against
 * the real Worker in workerd and the Node server: each task of a pull queue reaches a handler on
 * this machine written for pushes (the SDK's `createHandler`, unchanged) as a signed push,
 * and its answer is relayed: respond mode, lease mode with its own lease calls, Retry-After.
 * Ctrl-C gives back what the command holds: nothing is left leased.
 */
import { createServer, type Server } from 'node:http';
import { getRequestListener } from '@hono/node-server';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../src/node/postgres.ts';
import { RetryAfterError } from '../../src/sdk/errors.ts';
import { createHandler } from '../../src/sdk/handler.ts';
import { spawnCli } from '../helpers/cli.ts';
import type { TestDatabase } from '../helpers/db.ts';
import { apiCall, useNodeBeside, useWorkerFixture } from '../helpers/worker-fixture.ts';

const VARS = { SLUICE_QUEUES: JSON.stringify({ dev: { pull: true } }) };
const f = useWorkerFixture(() => VARS);

/** A handler as its author would serve it, at /task: respond mode, but lease mode for task 3. */
async function startHandler(sluiceUrl: string) {
  const seen: Array<{ path: string; n: number; attempt: number }> = [];
  let deferred = false;
  let hang: (() => void) | null = null;
  const work = (path: string) =>
    createHandler<unknown>(
      async (push) => {
        const n = push.json<{ n: number }>().n;
        seen.push({ path, n, attempt: push.attempt });
        // Told to come back later, once: given back without using an attempt.
        if (n === 2 && !deferred) {
          deferred = true;
          throw new RetryAfterError(1_000);
        }
        // Never answers until the test lets it go: what Ctrl-C must give back.
        if (n === 9) await new Promise<void>((resolve) => (hang = resolve));
        return { done: n };
      },
      {
        sluiceUrl,
        // Pushes forwarded by `sluice listen` are taken by a handler in development only.
        acceptForwarded: true,
        mode: path === '/lease' ? 'lease' : 'respond',
        onError: (e) => console.error('handler:', e),
      },
    );
  const handlers = { respond: work('/respond'), lease: work('/lease') };
  const server: Server = createServer(
    getRequestListener(async (request) => {
      if (new URL(request.url).pathname !== '/task') return new Response('no such path', { status: 404 });
      const { n } = (await request.clone().json()) as { n: number };
      return (n === 3 ? handlers.lease : handlers.respond)(request);
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url,
    seen,
    release: () => hang?.(),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const call = (base: string, method: string, path: string, body?: unknown) => apiCall(base, f.secrets.apiKey, method, path, body);

async function statuses(db: TestDatabase['db']): Promise<Record<string, string>> {
  const rows = await db.query<{ n: number; status: string }>(
    `select (body::jsonb ->> 'n')::int as n, status from sluice.all_tasks where queue = 'dev'`,
  );
  return Object.fromEntries(rows.map((r) => [r.n, r.status]));
}

async function exercise(base: string, db: TestDatabase['db']) {
  const handler = await startHandler(base);
  const target = { url: base, env: { SLUICE_URL: base, SLUICE_API_KEY: f.secrets.pullKey } };
  const listening = spawnCli(target, ['listen', '--queue', 'dev', '--forward-to', `${handler.url}/task`, '--json']);
  let nowhere: ReturnType<typeof spawnCli> | null = null;
  try {
    // Respond mode: 1 is completed with the handler's answer; 2 is deferred once (Retry-After), then done.
    for (const n of [1, 2]) expect((await call(base, 'POST', '/v1/tasks', { queue: 'dev', body: { n } })).status).toBe(201);
    await expect.poll(() => statuses(db), { timeout: 20_000, interval: 100 }).toEqual({ 1: 'succeeded', 2: 'succeeded' });
    const two = await db.query<{ attempts: number; result: string }>(
      `select attempts, result from sluice.all_tasks where body::jsonb ->> 'n' = '2'`,
    );
    expect(two[0]).toMatchObject({ attempts: 1, result: JSON.stringify({ done: 2 }) });

    // Lease mode: the handler answers with Sluice-Ack: lease and completes the task by its own lease calls.
    expect((await call(base, 'POST', '/v1/tasks', { queue: 'dev', body: { n: 3 } })).status).toBe(201);
    await expect.poll(() => statuses(db), { timeout: 20_000, interval: 100 }).toMatchObject({ 3: 'succeeded' });

    // Ctrl-C while the handler holds a task unanswered (one at a time, so no pull is waiting
    // meanwhile): the command gives it back, its attempt unused, and nothing stays leased.
    expect((await call(base, 'POST', '/v1/tasks', { queue: 'dev', body: { n: 9 } })).status).toBe(201);
    await expect.poll(() => handler.seen.some((s) => s.n === 9), { timeout: 20_000, interval: 50 }).toBe(true);
    listening.child.kill('SIGINT');
    expect(await listening.exited).toBe(0);
    const [trust, ...events] = listening.output.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { outcome?: string; answer?: number; gave_back?: number; issuer?: string });
    // It said first what the handler must trust, as `stripe listen` prints its secret.
    expect(trust).toEqual({
      forward_to: `${handler.url}/task`,
      issuer: 'sluice-forward',
      jwks_url: `${base}/.well-known/forward-jwks.json`,
      webhook_secret: null,
    });
    const said = events.map((e) => (e.gave_back === undefined ? `${e.answer} ${e.outcome}` : `gave back ${e.gave_back}`));
    expect(said.slice(0, 3).sort()).toEqual(['200 succeeded', '200 succeeded', '503 deferred']);
    expect(said.slice(3)).toEqual(['202 lease_kept', 'gave back 1']);
    const left = await db.query<{ status: string; attempts: number }>(
      `select status, attempts from sluice.tasks where body::jsonb ->> 'n' = '9'`,
    );
    expect(left).toEqual([{ status: 'pending', attempts: 0 }]);
    expect((await db.query(`select 1 from sluice.tasks where status = 'leased'`)).length).toBe(0);
    // Each push verified by the handler's receiver; the deferred one came again with its attempt given back.
    expect(handler.seen.map((s) => `${s.path} ${s.n} ${s.attempt}`).sort()).toEqual([
      '/lease 3 1',
      '/respond 1 1',
      '/respond 2 1',
      '/respond 2 1',
      '/respond 9 1',
    ]);

    // A handler that cannot be reached (nothing listening there): the task goes back unused.
    const closed = `http://127.0.0.1:${await freePort()}/task`;
    const down = spawnCli(target, ['listen', '--queue', 'dev', '--forward-to', closed, '--json']);
    nowhere = down;
    expect((await call(base, 'POST', '/v1/tasks', { queue: 'dev', body: { n: 10 } })).status).toBe(201);
    await expect.poll(() => down.output.stdout.includes('"outcome":"released"'), { timeout: 20_000, interval: 50 }).toBe(true);
    down.child.kill('SIGINT');
    expect(await down.exited).toBe(0);
    const back = await db.query<{ n: number; status: string; attempts: number }>(
      `select (body::jsonb ->> 'n')::int as n, status, attempts from sluice.tasks where queue = 'dev' order by 1`,
    );
    // 9 (given back at the first Ctrl-C) and 10: whichever it pulled went back unused; nothing is leased.
    expect(back).toEqual([
      { n: 9, status: 'pending', attempts: 0 },
      { n: 10, status: 'pending', attempts: 0 },
    ]);
  } finally {
    for (const cli of [listening, nowhere]) if (cli && cli.child.exitCode === null) cli.child.kill('SIGKILL');
    handler.release();
    await handler.close();
  }
}

describe('sluice listen', () => {
  it('on the Worker', async () => {
    await exercise(f.worker.url, f.t.db);
  }, 60_000);

  describe('on the Node server', () => {
    const side = useNodeBeside(f, VARS);
    it('does the same', async () => {
      await exercise(side.node.url, side.t.db);
    }, 60_000);
  });
});
