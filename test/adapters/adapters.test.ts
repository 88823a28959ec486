/**
 * The SDK's receivers inside the real frameworks (src/sdk/adapters.ts): Express, Fastify and
 * Next.js as installed in test/adapters (a package of its own), and a Lambda handler behind a
 * stand-in for a function URL that turns each HTTP request into the 2.0 event AWS sends. Next.js
 * runs its own production server (`next build`, then `next start`) on the App Router route of
 * test/adapters/next-app, the handler as the SDK's README writes it. A real Sluice (the Node
 * server) pushes to each; each verifies it from the raw body and runs the task; each refuses a
 * push whose body was changed after signing (401), before the task runs.
 */
import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { promisify } from 'node:util';
import express from 'express';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/node/postgres.ts';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { signPush } from '../../src/protocol/signature.ts';
import { type LambdaEvent, sluiceExpress, sluiceFastify, sluiceLambda } from '../../src/sdk/index.ts';
import { type Keyring, loadKeyring } from '../../src/security/keyring.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { BIN, spawnReady } from '../helpers/process.ts';
import { requireInstalled } from './installed.ts';

requireInstalled();

let t: TestDatabase;
let secrets: TestSecrets;
let keyring: Keyring;
let sluice: NodeSluice;
let expressServer: Server;
let fastify: FastifyInstance;
let lambdaServer: Server;
let nextServer: ChildProcess | undefined;
const NEXT_APP = new URL('./next-app/', import.meta.url).pathname;
/** Next's command, run by the project's Node 22 (its bin script would take the system's). */
const NEXT = [new URL('./node_modules/next/dist/bin/next', import.meta.url).pathname];
const NEXT_ENV = { NEXT_TELEMETRY_DISABLED: '1' };
const ran: Array<{ by: string; taskId: string; body: unknown }> = [];
const urls: Record<string, string> = {};

const task = (by: string) => async (push: { taskId: string; json(): unknown }) => {
  ran.push({ by, taskId: push.taskId, body: push.json() });
  return { done: by };
};

const listen = (server: Server) =>
  new Promise<string>((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as { port: number }).port}`)),
  );

beforeAll(async () => {
  [t, secrets] = await Promise.all([createTestDatabase(), makeSecrets()]);
  keyring = await loadKeyring({ keys: [secrets.signingJwk] });
  sluice = await startNodeSluice({ env: testEnv(secrets, t.url) });
  const options = { sluiceUrl: sluice.url };

  const app = express();
  // Mounted before the app's JSON parser (which would leave no raw body to verify).
  app.post('/express/hook', express.raw({ type: '*/*' }), sluiceExpress(task('express'), options));
  app.use(express.json());
  // Mounted after it: the adapter refuses the parsed body rather than verify a re-serialised one.
  app.post('/express/parsed', sluiceExpress(task('express-parsed'), options));
  app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    res.status(500).send(error.message);
  });
  expressServer = createServer(app);
  urls.express = `${await listen(expressServer)}/express/hook`;

  fastify = Fastify();
  fastify.post('/json', async (request) => request.body); // JSON elsewhere still parsed
  await fastify.register(sluiceFastify(task('fastify'), { ...options, path: '/fastify/hook' }));
  urls.fastify = `${await fastify.listen({ port: 0, host: '127.0.0.1' })}/fastify/hook`;

  // A function URL's part: the HTTP request becomes a 2.0 event, the result an HTTP answer.
  const handler = sluiceLambda(task('lambda'), { ...options, url: (request) => request.url.replace('https://', 'http://') });
  lambdaServer = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const [path, query = ''] = (req.url ?? '/').split('?');
    const event: LambdaEvent = {
      version: '2.0',
      rawPath: path,
      rawQueryString: query,
      headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(',') : v])),
      requestContext: { domainName: String(req.headers.host), http: { method: req.method ?? 'POST' } },
      body: Buffer.concat(chunks).toString('base64'),
      isBase64Encoded: true,
    };
    const result = await handler(event);
    res.writeHead(result.statusCode, result.headers).end(result.isBase64Encoded ? Buffer.from(result.body, 'base64') : result.body);
  });
  urls.lambda = `${await listen(lambdaServer)}/lambda/hook`;

  // Built as a deployment builds it, without Sluice's URL (the route's module is loaded then
  // too), and started with it.
  await promisify(execFile)(`${BIN}/node`, [...NEXT, 'build', NEXT_APP], { env: { ...process.env, ...NEXT_ENV } });
  const port = await freePort();
  nextServer = await spawnReady(
    `${BIN}/node`,
    [...NEXT, 'start', NEXT_APP, '-p', String(port), '-H', '127.0.0.1'],
    { ...NEXT_ENV, SLUICE_URL: sluice.url, PUBLIC_ORIGIN: `http://127.0.0.1:${port}` },
    'Ready',
  );
  urls.next = `http://127.0.0.1:${port}/api/task`;
}, 120_000);

afterAll(async () => {
  await sluice?.close();
  await fastify?.close();
  expressServer?.close();
  lambdaServer?.close();
  nextServer?.kill('SIGKILL');
  await t?.drop();
});

async function enqueue(url: string, body: unknown): Promise<string> {
  const res = await fetch(`${sluice.url}/v1/tasks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url, body }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

describe('receivers inside their frameworks', () => {
  for (const by of ['express', 'fastify', 'lambda', 'next']) {
    it(`${by}: verifies a real push from the raw body and runs the task; refuses a tampered one`, async () => {
      const id = await enqueue(urls[by]!, { order: 7, note: 'spaced  out' });
      await expect
        .poll(async () => (await t.db.query<{ status: string }>('select status from sluice.all_tasks where id = $1', [id]))[0]?.status, {
          timeout: 15_000,
        })
        .toBe('succeeded');
      const [row] = await t.db.query<{ result: string }>('select result from sluice.all_tasks where id = $1', [id]);
      // Next.js runs the task in its own server, which answers with the body it verified.
      if (by === 'next') expect(JSON.parse(row!.result)).toEqual({ done: by, got: { order: 7, note: 'spaced  out' } });
      else {
        expect(ran.filter((r) => r.by === by)).toEqual([{ by, taskId: id, body: { order: 7, note: 'spaced  out' } }]);
        expect(JSON.parse(row!.result)).toEqual({ done: by });
      }

      // Signed by Sluice's key for this URL and body; the body then changed on the way.
      const signed = new TextEncoder().encode('{"order":7}');
      const signature = await signPush({
        key: keyring.active,
        issuer: 'sluice',
        taskId: '999',
        leaseId: crypto.randomUUID(),
        url: urls[by]!,
        body: signed,
        nowMs: Date.now(),
      });
      const tampered = await fetch(urls[by]!, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'sluice-signature': signature, 'sluice-task-id': '999' },
        body: '{"order":8}',
      });
      expect(tampered.status).toBe(401);
      expect(await tampered.text()).toContain('push refused');
      if (by !== 'next') expect(ran.filter((r) => r.by === by)).toHaveLength(1);
    });
  }

  it('express: refuses a body a JSON parser read before it, naming the fix', async () => {
    const url = urls.express!.replace('/express/hook', '/express/parsed');
    const body = '{"order":7}';
    const signature = await signPush({
      key: keyring.active,
      issuer: 'sluice',
      taskId: '998',
      leaseId: crypto.randomUUID(),
      url,
      body: new TextEncoder().encode(body),
      nowMs: Date.now(),
    });
    const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'sluice-signature': signature }, body });
    expect(res.status).toBe(500);
    expect(await res.text()).toContain('use express.raw()');
    expect(ran.some((r) => r.by === 'express-parsed')).toBe(false);
  });

  it("leaves the app's own JSON parsing alone", async () => {
    const res = await fetch(urls.fastify!.replace('/fastify/hook', '/json'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"a":1}',
    });
    expect(await res.json()).toEqual({ a: 1 });
  });
});
