/**
 * Any language: the Python examples the README and docs/guide.md show, run as they are.
 * enqueue.py (standard library only) enqueues; verify.py receives the push and verifies it
 * with PyJWT's stock JWKS client.
 * Uses Debian's python3 with python3-jwt; skipped, saying so, where that is not installed.
 */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/node/postgres.ts';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { SluiceClient } from '../../src/sdk/index.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PYTHON = '/usr/bin/python3';
const hasPyJwt = (() => {
  try {
    execFileSync(PYTHON, ['-c', 'import jwt, cryptography; jwt.PyJWKClient']);
    return true;
  } catch {
    console.warn('python tests skipped: /usr/bin/python3 with python3-jwt is not installed (apt-get install python3-jwt)');
    return false;
  }
})();

let t: TestDatabase;
let sluice: NodeSluice;
let secrets: TestSecrets;
let stop = () => {};

beforeAll(async () => {
  if (!hasPyJwt) return;
  [t, secrets] = await Promise.all([createTestDatabase(), makeSecrets()]);
  sluice = await startNodeSluice({ env: testEnv(secrets, t.url) });
});
afterAll(async () => {
  stop();
  await sluice?.close();
  await t?.drop();
});

describe.skipIf(!hasPyJwt)('the Python examples', () => {
  it('enqueue with urllib, and verify the push with PyJWKClient', async () => {
    const port = await freePort();
    const server = spawn(PYTHON, ['examples/python/verify.py'], {
      cwd: ROOT,
      env: { ...process.env, SLUICE_URL: sluice.url, PORT: String(port) },
    });
    stop = () => server.kill('SIGKILL');
    let log = '';
    await new Promise<void>((resolve, reject) => {
      server.stdout.on('data', (d: Buffer) => {
        log += d.toString();
        if (log.includes('listening on')) resolve();
      });
      server.stderr.on('data', (d: Buffer) => {
        log += d.toString();
      });
      server.on('exit', (code) => reject(new Error(`verify.py exited ${code}: ${log}`)));
    });

    // Not execFileSync: Sluice serves from this very process, so its event loop must run.
    const { stdout: out } = await promisify(execFile)(PYTHON, ['examples/python/enqueue.py', `http://127.0.0.1:${port}/hook`], {
      cwd: ROOT,
      env: { ...process.env, SLUICE_URL: sluice.url, SLUICE_API_KEY: secrets.apiKey },
    });
    const { id } = JSON.parse(out) as { id: string };
    const client = new SluiceClient({ baseUrl: sluice.url, apiKey: secrets.apiKey });
    let task = await client.get(id);
    for (let i = 0; i < 100 && task.status !== 'succeeded'; i++) {
      await new Promise((r) => setTimeout(r, 50));
      task = await client.get(id);
    }
    expect(task.status).toBe('succeeded');
    expect(JSON.parse(task.result!)).toEqual({ verified_by: 'python', task: id });
    expect(log).toContain(`task ${id} attempt 1: verified`);

    // A tampered push is refused by the same Python code.
    const forged = await fetch(`http://127.0.0.1:${port}/hook`, {
      method: 'POST',
      body: '{}',
      headers: { 'Sluice-Signature': 'e30.e30.e30' },
    });
    expect(forged.status).toBe(401);
  });
});
