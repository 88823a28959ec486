/**
 * The `sluice` CLI as a user runs it, for test/runtimes/cli*.test.ts: the real bin as a child
 * process with Sluice's URL and a key in its environment, and a Node server to run it against.
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, expect } from 'vitest';
import { freePort } from '../../src/node/postgres.ts';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { generateApiKey } from '../../src/security/api-keys.ts';
import { makeSecrets, type TestSecrets, testEnv } from './config.ts';
import { contractProblem } from './contract.ts';
import { createTestDatabase, type TestDatabase } from './db.ts';
import { type ReceivedPush, startEndpoint, type TestEndpoint } from './endpoint.ts';
import { BIN, ROOT } from './process.ts';

export const adminKey = await generateApiKey('admin', ['admin']);
export const withAdmin = (secrets: TestSecrets) => JSON.stringify([...JSON.parse(secrets.apiKeysJson), adminKey.entry]);

/** How the test endpoint answers, by path: keep the lease and go silent, fail each task's first push, or 200. */
export function replies(endpoint: TestEndpoint): void {
  const seen = new Set<string>();
  endpoint.reply((push: ReceivedPush) => {
    if (push.path.startsWith('/keep')) return { status: 202, headers: { 'Sluice-Ack': 'lease' } };
    const id = push.headers['sluice-task-id'] as string;
    if (push.path.startsWith('/fail-once') && !seen.has(id)) {
      seen.add(id);
      return { status: 500, body: 'first push fails' };
    }
    return { status: 200, body: 'ok' };
  });
}

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface Target {
  url: string;
  env: Record<string, string>;
}

/** The bin as package.json names it, run by the project's Node 22. */
export const BIN_SLUICE = [`${BIN}/node`, 'src/cli/sluice.mjs'];

export interface RunOptions {
  env?: Record<string, string>;
  command?: string[];
}

/** Starts `command` (default: the bin) with `args`, Sluice's URL and a key in the environment; its output so far. */
export function spawnCli(target: Target, args: string[], options: RunOptions = {}) {
  const [bin, ...pre] = options.command ?? BIN_SLUICE;
  const child = spawn(bin!, [...pre, ...args], {
    cwd: ROOT,
    env: { ...process.env, DENO_NO_UPDATE_CHECK: '1', ...target.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = { stdout: '', stderr: '' };
  child.stdout.on('data', (chunk: Buffer) => {
    output.stdout += chunk;
  });
  child.stderr.on('data', (chunk: Buffer) => {
    output.stderr += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
  return { child, output, exited };
}

export async function sluice(target: Target, args: string[], options: RunOptions = {}): Promise<Run> {
  const { output, exited } = spawnCli(target, args, options);
  return { code: await exited, ...output };
}

/** Its stdout as JSON, failing with what it printed when it did not succeed. */
export async function json<T = Record<string, unknown>>(run: Promise<Run>): Promise<T> {
  const r = await run;
  expect(r, r.stderr).toMatchObject({ code: 0 });
  return JSON.parse(r.stdout) as T;
}

/** `--json` output that is an API answer passed through is what /openapi.json documents for it. */
export async function expectDocumented(method: string, url: string, body: unknown): Promise<void> {
  const response = new Response(JSON.stringify(body), { headers: { 'content-type': 'application/json' } });
  expect(await contractProblem(method, new URL(url), response)).toBeNull();
}

export async function api<T = Record<string, unknown>>(target: Target, path: string, init: RequestInit = {}): Promise<T> {
  const res = await fetch(`${target.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${target.env.SLUICE_API_KEY}`, 'content-type': 'application/json' },
  });
  expect(res.ok, `${path}: ${res.status}`).toBe(true);
  return (await res.json()) as T;
}

export const enqueue = (target: Target, task: Record<string, unknown>) =>
  api<{ id: string }>(target, '/v1/tasks', { method: 'POST', body: JSON.stringify(task) }).then((t) => t.id);

export async function until<T>(probe: () => Promise<T | undefined | null | false>, what: string, timeoutMs = 15_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== null && value !== false) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** `promise`, or a failure naming what did not happen within `ms`. */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** `sluice tail` as a running child: its lines as they come, and an end by SIGINT. */
export function startTail(target: Target, args: string[], options: RunOptions = {}) {
  const { child, output, exited } = spawnCli(target, ['tail', ...args], options);
  // Whole lines only: a chunk may end within one.
  const lines = () => output.stdout.split('\n').slice(0, -1);
  return {
    lines,
    waitFor: (test: (line: string) => boolean, what: string) => until(async () => lines().find(test), `tail to print ${what}`),
    /** Ctrl-C: resolves with the exit code. */
    interrupt: () => {
      child.kill('SIGINT');
      return exited;
    },
    /** SIGTERM, as a supervisor stops it: resolves with the exit code. */
    terminate: () => {
      child.kill('SIGTERM');
      return exited;
    },
    /** The reader of its output goes away, as `head` does once it has its lines. */
    closeOutput: () => child.stdout.destroy(),
    exited,
    stderr: () => output.stderr,
  };
}

/** What a test of the CLI against the Node server has, once its `beforeAll` has run. */
export interface NodeCli {
  t: TestDatabase;
  endpoint: TestEndpoint;
  secrets: TestSecrets;
  server: NodeSluice;
  /** The same keys, and a database that does not answer: every call is a 503. */
  broken: NodeSluice;
  as: { admin: Target; writer: Target; reader: Target };
  row: (sql: string, params: unknown[]) => Promise<Record<string, unknown> | undefined>;
  taskRow: (id: string) => Promise<Record<string, unknown> | undefined>;
}

/**
 * A test database, an endpoint answering by path (`replies`), and the Node server on them with
 * an admin, a writer and a reader key and the queue `envq` (concurrency 7) in its environment.
 */
export function useNodeCli(): NodeCli {
  const cli = {} as NodeCli;
  beforeAll(async () => {
    const [t, endpoint, secrets] = await Promise.all([createTestDatabase(), startEndpoint(), makeSecrets()]);
    Object.assign(cli, { t, endpoint, secrets });
    replies(endpoint);
    const env = testEnv(secrets, t.url, {
      SLUICE_API_KEYS: withAdmin(secrets),
      SLUICE_QUEUES: JSON.stringify({ envq: { concurrency: 7 } }),
    });
    cli.server = await startNodeSluice({ env });
    cli.broken = await startNodeSluice({
      env: { ...env, DATABASE_URL: `postgres://nobody@127.0.0.1:${await freePort()}/none` },
      dispatch: false,
      connectTimeoutMs: 500,
    });
    const target = (key: string): Target => ({ url: cli.server.url, env: { SLUICE_URL: cli.server.url, SLUICE_API_KEY: key } });
    cli.as = { admin: target(adminKey.key), writer: target(secrets.apiKey), reader: target(secrets.readKey) };
    cli.row = async (sql, params) => (await t.db.query<Record<string, unknown>>(sql, params))[0];
    cli.taskRow = (id) =>
      cli.row('select status, attempts, lease_id, queue, concurrency_key, body from sluice.all_tasks where id = $1', [id]);
  });
  afterAll(async () => {
    await Promise.all([cli.server?.close(), cli.broken?.close()]);
    await cli.endpoint?.close();
    await cli.t?.drop();
  });
  return cli;
}
