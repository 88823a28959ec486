/**
 * When the database does not answer (down, unreachable, or no connection free in time), the API
 * answers 503 with Retry-After, in time, on both paths: never a 500, never a request left hanging.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/node/postgres.ts';
import { startNodeSluice } from '../../src/node/server.ts';
import { bundleWorker, startWorker } from '../../src/node/worker-runtime.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';

let secrets: TestSecrets;
/** Accepts connections and never answers: a database that hangs. */
let silent: Server;
const held: Socket[] = [];
let silentPort: number;
let closedPort: number;

beforeAll(async () => {
  secrets = await makeSecrets();
  silent = createServer((socket) => held.push(socket));
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  silentPort = (silent.address() as { port: number }).port;
  closedPort = await freePort();
});
afterAll(async () => {
  for (const s of held) s.destroy();
  await new Promise((r) => silent.close(r));
});

async function enqueue(baseUrl: string): Promise<{ status: number; retryAfter: string | null; code: string; ms: number }> {
  const started = performance.now();
  const res = await fetch(`${baseUrl}/v1/tasks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url: 'https://example.com/hook' }),
  });
  const body = (await res.json()) as { code: string };
  return { status: res.status, retryAfter: res.headers.get('retry-after'), code: body.code, ms: performance.now() - started };
}

describe('the database does not answer', () => {
  it('on Node: refused, or no connection within the connect timeout: 503 with Retry-After', async () => {
    for (const port of [closedPort, silentPort]) {
      const sluice = await startNodeSluice({
        env: testEnv(secrets, `postgres://sluice:sluice@127.0.0.1:${port}/sluice`),
        dispatch: false,
        connectTimeoutMs: 300,
      });
      try {
        const answer = await enqueue(sluice.url);
        expect(answer).toMatchObject({ status: 503, retryAfter: '1', code: 'database_unavailable' });
        // In time: the connect timeout, not a hang (the bound is generous for a loaded machine).
        expect(answer.ms).toBeLessThan(10_000);
      } finally {
        await sluice.close();
      }
    }
  });

  it('on the Worker: the Neon driver cannot reach its endpoint: 503 with Retry-After', async () => {
    const worker = await startWorker({
      script: await bundleWorker(),
      vars: testEnv(secrets, `postgres://sluice:sluice@127.0.0.1:${closedPort}/sluice`, {
        SLUICE_NEON_WS_PROXY: `127.0.0.1:${closedPort}/v2`,
      }),
    });
    try {
      expect(await enqueue(worker.url)).toMatchObject({ status: 503, retryAfter: '1', code: 'database_unavailable' });
    } finally {
      await worker.close();
    }
  }, 60_000);
});
