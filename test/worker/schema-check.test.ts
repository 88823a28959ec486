/**
 * A start that cannot lie (issue 21): on a database that is not migrated for this version, the
 * Node server refuses to start with one line naming `npm run db:migrate`, and the Worker (which
 * has no start) answers 503 `schema_not_migrated`, never 500, with `/healthz` 503 too.
 */

import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LATEST_MIGRATION } from '../../src/db/migrate.ts';
import { freePort } from '../../src/node/postgres.ts';
import { type RunningWorker, startWorker } from '../../src/node/worker-runtime.ts';
import { type RunningProxy, startWsProxy } from '../../src/node/ws-proxy.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { BIN, ROOT } from '../helpers/process.ts';

let secrets: TestSecrets;
let empty: TestDatabase;
let behind: TestDatabase;
beforeAll(async () => {
  [secrets, empty, behind] = await Promise.all([makeSecrets(), createTestDatabase({ empty: true }), createTestDatabase()]);
  await behind.db.query('delete from sluice.migrations where name = $1', [LATEST_MIGRATION]);
});
afterAll(async () => {
  await Promise.all([empty?.drop(), behind?.drop()]);
});

/** Runs `npm run serve`'s program until it exits; its exit code and everything it printed. */
async function serve(url: string, env: Record<string, string | undefined> = {}): Promise<{ code: number | null; output: string }> {
  const child = spawn(`${BIN}/node`, ['src/node/serve.ts'], {
    cwd: ROOT,
    env: { ...process.env, ...testEnv(secrets, url), PORT: String(await freePort()), NO_COLOR: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c: Buffer) => {
    output += c.toString();
  });
  child.stderr.on('data', (c: Buffer) => {
    output += c.toString();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  clearTimeout(timer);
  return { code, output };
}

describe('on Node, serve', () => {
  it('refuses a database with no schema, in one line naming npm run db:migrate', async () => {
    const { code, output } = await serve(empty.url);
    expect(code).toBe(1);
    expect(output.trim().split('\n')).toEqual([
      expect.stringMatching(/^sluice: the database has no Sluice schema: run `npm run db:migrate`/),
    ]);
  });

  it('refuses a database that refuses it (no user name, a wrong password) in one line naming DATABASE_URL', async () => {
    // No user in the URL and none in the environment: what a shell with $USER empty gets.
    const nameless = new URL(behind.url);
    nameless.username = '';
    nameless.password = '';
    const unnamed = await serve(nameless.href, { USER: '', PGUSER: '', LOGNAME: '' });
    expect(unnamed.code).toBe(1);
    expect(unnamed.output.trim().split('\n')).toEqual([
      expect.stringMatching(/^sluice: DATABASE_URL: the database refused the connection: /),
    ]);
    const wrong = new URL(behind.url);
    wrong.password = 'not-the-password';
    const refused = await serve(wrong.href);
    expect(refused.code).toBe(1);
    expect(refused.output.trim().split('\n')).toEqual([
      expect.stringMatching(/^sluice: DATABASE_URL: the database refused the connection: password authentication failed/),
    ]);
  });

  it('refuses a port in use (npm start holds 8787) in one line naming PORT', async () => {
    const current = await createTestDatabase();
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = (taken.address() as AddressInfo).port;
      const { code, output } = await serve(current.url, { PORT: String(port) });
      expect(code).toBe(1);
      expect(output.trim().split('\n')).toEqual([expect.stringMatching(new RegExp(`^sluice: .*PORT: 127\\.0\\.0\\.1:${port} is in use`))]);
    } finally {
      taken.close();
      await current.drop();
    }
  });

  it('with the database away, starts, and says each failure in one line, never a stack', async () => {
    const child = spawn(`${BIN}/node`, ['src/node/serve.ts'], {
      cwd: ROOT,
      env: {
        ...process.env,
        ...testEnv(secrets, `postgres://nobody@127.0.0.1:${await freePort()}/none`),
        PORT: String(await freePort()),
        NO_COLOR: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const collect = (c: Buffer) => {
      output += c.toString();
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    try {
      // Until the first run, chores and wake channel have each failed (a run backs off after).
      await expect
        .poll(() => ['dispatcher run failed', 'sweep chore failed', 'listening for wake-ups failed'].every((t) => output.includes(t)), {
          timeout: 15_000,
        })
        .toBe(true);
    } finally {
      child.kill('SIGKILL');
    }
    const lines = output.trim().split('\n');
    expect(lines[0]).toBe('sluice: the database does not answer yet; starting anyway (503 until it does)');
    for (const line of lines) expect(line).toMatch(/^sluice: /);
  });

  it('npm run db:migrate: a database that does not answer is one line naming DATABASE_URL', async () => {
    const child = spawn(`${BIN}/node`, ['src/node/cli.ts', 'migrate'], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: `postgres://nobody@127.0.0.1:${await freePort()}/none`, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    expect(code).toBe(2);
    expect(output.trim().split('\n')).toEqual([expect.stringMatching(/^sluice: DATABASE_URL: migrating failed: connect ECONNREFUSED/)]);
  });

  it('refuses a schema older than this version, naming the migration it needs', async () => {
    const { code, output } = await serve(behind.url);
    expect(code).toBe(1);
    expect(output.trim().split('\n')).toEqual([expect.stringContaining(`needs ${LATEST_MIGRATION}): run \`npm run db:migrate\``)]);
  });
});

describe('on the Worker', () => {
  let proxy: RunningProxy;
  let worker: RunningWorker;
  beforeAll(async () => {
    proxy = await startWsProxy({ host: '127.0.0.1', port: inject('pgPort') });
    worker = await startWorker({ vars: testEnv(secrets, empty.url, { SLUICE_NEON_WS_PROXY: proxy.address }) });
  });
  afterAll(async () => {
    await worker?.close();
    await proxy?.close();
  });

  it('answers 503 schema_not_migrated, not 500, and /healthz says why', async () => {
    const res = await fetch(`${worker.url}/v1/tasks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: 'https://example.com/hook', body: {} }),
    });
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ code: 'schema_not_migrated' });
    const health = await fetch(`${worker.url}/healthz`);
    expect(health.status).toBe(503);
    expect(await health.json()).toMatchObject({ status: 'unavailable', detail: expect.stringContaining('npm run db:migrate') });
  });
});
