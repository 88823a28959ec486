/**
 * The self-hosted server (src/node/serve.ts) under Bun and Deno, as real processes on a real
 * Postgres: each takes an enqueue over HTTP, pushes it signed to a local endpoint, records the
 * outcome, and stops gracefully on SIGTERM. (Node runs the same server in the db tier.)
 */
import type { ChildProcess } from 'node:child_process';
import { createLocalJWKSet } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/node/postgres.ts';
import { verifyPush } from '../../src/protocol/signature.ts';
import { loadKeyring } from '../../src/security/keyring.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';
import { BIN, spawnReady } from '../helpers/process.ts';

let t: TestDatabase;
let endpoint: TestEndpoint;
let secrets: TestSecrets;

beforeAll(async () => {
  [t, endpoint, secrets] = await Promise.all([createTestDatabase(), startEndpoint(), makeSecrets()]);
});
afterAll(async () => {
  await endpoint?.close();
  await t?.drop();
});

/** Starts serve.ts under a runtime; resolves once it listens. */
async function startServer(command: string, args: string[]): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const child = await spawnReady(
    command,
    [...args, 'src/node/serve.ts'],
    { ...testEnv(secrets, t.url), PORT: String(port) },
    'sluice: listening on',
  );
  return { url: `http://127.0.0.1:${port}`, child };
}

describe.each([
  ['Bun', `${BIN}/bun`, []],
  ['Deno', `${BIN}/deno`, ['run', '-A']],
])('the server on %s', (_name, command, args) => {
  it('enqueues, pushes a signed request, records the outcome, and stops on SIGTERM', async () => {
    endpoint.received.length = 0;
    const server = await startServer(command, args);
    const exited = new Promise<number | null>((resolve) => server.child.once('exit', resolve));
    try {
      const res = await fetch(`${server.url}/v1/tasks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url: `${endpoint.url}/hook`, body: { runtime: command } }),
      });
      expect(res.status).toBe(201);
      const { id } = (await res.json()) as { id: string };
      const [push] = await endpoint.waitFor(1);
      const keyring = await loadKeyring({ keys: [secrets.signingJwk] });
      const claims = await verifyPush({
        token: push!.headers['sluice-signature'] as string,
        keys: createLocalJWKSet(keyring.jwks),
        url: push!.url,
        body: push!.body,
        nowMs: Date.now(),
      });
      expect(claims.sub).toBe(id);
      await expect
        .poll(async () => {
          const task = await fetch(`${server.url}/v1/tasks/${id}`, { headers: { authorization: `Bearer ${secrets.apiKey}` } });
          return ((await task.json()) as { status: string }).status;
        })
        .toBe('succeeded');
    } finally {
      server.child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  });
});
