/**
 * The `sluice` CLI (src/cli) as a user runs it: the real bin as a child process, against the
 * Node server on a test database and against the Worker in workerd. Every command's effect is
 * checked in the database or through the API, not only in what the CLI prints; `--json` output
 * is checked against /openapi.json where it is an API answer passed through.
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GLOBAL_FLAGS } from '../../src/cli/args.ts';
import { COMMANDS } from '../../src/cli/commands/index.ts';
import { taskCountsRefresh } from '../../src/db/metrics.ts';
import { freePort } from '../../src/node/postgres.ts';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { generateApiKey } from '../../src/security/api-keys.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { contractProblem } from '../helpers/contract.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { type ReceivedPush, type Reply, startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';
import { BIN, ROOT } from '../helpers/process.ts';
import { useWorkerFixture } from '../helpers/worker-fixture.ts';

const adminKey = await generateApiKey('admin', ['admin']);
const withAdmin = (secrets: TestSecrets) => JSON.stringify([...JSON.parse(secrets.apiKeysJson), adminKey.entry]);

/** How the test endpoint answers, by path: keep the lease and go silent, fail each task's first push, or 200. */
function replies(endpoint: TestEndpoint): void {
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

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

interface Target {
  url: string;
  env: Record<string, string>;
}

/** The bin as package.json names it, run by the project's Node 22. */
const BIN_SLUICE = [`${BIN}/node`, 'src/cli/sluice.mjs'];

interface RunOptions {
  env?: Record<string, string>;
  command?: string[];
}

/** Starts `command` (default: the bin) with `args`, Sluice's URL and a key in the environment; its output so far. */
function spawnCli(target: Target, args: string[], options: RunOptions = {}) {
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

async function sluice(target: Target, args: string[], options: RunOptions = {}): Promise<Run> {
  const { output, exited } = spawnCli(target, args, options);
  return { code: await exited, ...output };
}

/** Its stdout as JSON, failing with what it printed when it did not succeed. */
async function json<T = Record<string, unknown>>(run: Promise<Run>): Promise<T> {
  const r = await run;
  expect(r, r.stderr).toMatchObject({ code: 0 });
  return JSON.parse(r.stdout) as T;
}

/** `--json` output that is an API answer passed through is what /openapi.json documents for it. */
async function expectDocumented(method: string, url: string, body: unknown): Promise<void> {
  const response = new Response(JSON.stringify(body), { headers: { 'content-type': 'application/json' } });
  expect(await contractProblem(method, new URL(url), response)).toBeNull();
}

async function api<T = Record<string, unknown>>(target: Target, path: string, init: RequestInit = {}): Promise<T> {
  const res = await fetch(`${target.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${target.env.SLUICE_API_KEY}`, 'content-type': 'application/json' },
  });
  expect(res.ok, `${path}: ${res.status}`).toBe(true);
  return (await res.json()) as T;
}

const enqueue = (target: Target, task: Record<string, unknown>) =>
  api<{ id: string }>(target, '/v1/tasks', { method: 'POST', body: JSON.stringify(task) }).then((t) => t.id);

async function until<T>(probe: () => Promise<T | undefined | null | false>, what: string, timeoutMs = 15_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== null && value !== false) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** `promise`, or a failure naming what did not happen within `ms`. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** `sluice tail` as a running child: its lines as they come, and an end by SIGINT. */
function startTail(target: Target, args: string[], options: RunOptions = {}) {
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

describe('sluice against the Node server', () => {
  let t: TestDatabase;
  let endpoint: TestEndpoint;
  let secrets: TestSecrets;
  let server: NodeSluice;
  let broken: NodeSluice;
  let as: { admin: Target; writer: Target; reader: Target };

  beforeAll(async () => {
    [t, endpoint, secrets] = await Promise.all([createTestDatabase(), startEndpoint(), makeSecrets()]);
    replies(endpoint);
    const env = testEnv(secrets, t.url, {
      SLUICE_API_KEYS: withAdmin(secrets),
      SLUICE_QUEUES: JSON.stringify({ envq: { concurrency: 7 } }),
    });
    server = await startNodeSluice({ env });
    // The same keys, and a database that does not answer: every call is a 503.
    broken = await startNodeSluice({
      env: { ...env, DATABASE_URL: `postgres://nobody@127.0.0.1:${await freePort()}/none` },
      dispatch: false,
      connectTimeoutMs: 500,
    });
    const target = (key: string): Target => ({ url: server.url, env: { SLUICE_URL: server.url, SLUICE_API_KEY: key } });
    as = { admin: target(adminKey.key), writer: target(secrets.apiKey), reader: target(secrets.readKey) };
  });
  afterAll(async () => {
    await Promise.all([server?.close(), broken?.close()]);
    await endpoint?.close();
    await t?.drop();
  });

  const row = async (sql: string, params: unknown[]) => (await t.db.query<Record<string, unknown>>(sql, params))[0];
  const taskRow = (id: string) =>
    row('select status, attempts, lease_id, queue, concurrency_key, body from sluice.all_tasks where id = $1', [id]);

  describe('help', () => {
    it('lists every command, and each command names all of its flags and the global ones', async () => {
      const main = await sluice(as.reader, ['--help']);
      expect(main.code).toBe(0);
      for (const c of COMMANDS) expect(main.stdout).toContain(c.words.join(' '));
      expect(main.stdout).toMatch(
        /Exit codes:[\s\S]*\b1\b.*4xx[\s\S]*\b2\b.*usage[\s\S]*\b3\b.*5xx[\s\S]*\b4\b.*internal[\s\S]*\b143\b.*SIGTERM/,
      );
      const helps = await Promise.all(COMMANDS.map((c) => sluice(as.reader, [...c.words, '--help'], { env: { SLUICE_URL: '' } })));
      COMMANDS.forEach((c, i) => {
        expect(helps[i]!.code, c.words.join(' ')).toBe(0);
        for (const f of [...c.flags, ...GLOBAL_FLAGS])
          expect(helps[i]!.stdout, `${c.words.join(' ')} --${f.name}`).toContain(`--${f.name}`);
      });
      expect((await sluice(as.reader, ['help', 'tail'])).stdout).toContain('How it works');
    });
  });

  describe('exit codes', () => {
    it('2 for a usage error, naming the problem, with nothing sent', async () => {
      const cases: Array<[string[], RegExp]> = [
        [['tasks', 'get'], /missing ID/],
        [['nonsense'], /unknown command "nonsense"/],
        [['tasks', 'list', '--limit', 'many'], /--limit must be a whole number/],
        [['tasks', 'list', '--colour'], /unknown option --colour/],
        [['queues', 'set', 'q'], /nothing to set/],
        [['tasks'], /which one\?/],
      ];
      for (const [args, message] of cases) {
        const r = await sluice(as.admin, args);
        expect(r.code, args.join(' ')).toBe(2);
        expect(r.stderr).toMatch(message);
      }
      const noUrl = await sluice(as.reader, ['status'], { env: { SLUICE_URL: '' } });
      expect(noUrl).toMatchObject({ code: 2, stdout: '' });
      expect(noUrl.stderr).toContain('set SLUICE_URL or give --url');
      const asJson = await sluice(as.reader, ['status', '--json'], { env: { SLUICE_API_KEY: '' } });
      expect(asJson.code).toBe(2);
      expect(JSON.parse(asJson.stderr)).toEqual({ code: 'usage', detail: 'no API key: set SLUICE_API_KEY or give --api-key' });
    });

    it('1 when the API refuses (4xx), with its status, code and detail on stderr', async () => {
      const missing = await sluice(as.reader, ['tasks', 'get', '999999']);
      expect(missing).toMatchObject({ code: 1, stdout: '' });
      expect(missing.stderr).toBe('sluice: 404 not_found: task 999999 was not found\n');
      const forbidden = await sluice(as.reader, ['queues', 'pause', 'q1', '--json']);
      expect(forbidden.code).toBe(1);
      expect(JSON.parse(forbidden.stderr)).toMatchObject({ status: 403, code: 'forbidden' });
      expect(await row('select paused from sluice.queues where name = $1', ['q1'])).toBeUndefined();
      const invalid = await sluice(as.admin, ['keys', 'set', 'q1', 'k', '--limit', '0']);
      expect(invalid.code).toBe(1);
      expect(invalid.stderr).toMatch(/^sluice: 400 invalid_request: .*\n {2}limit: /);
    });

    it('130 on Ctrl-C and 143 on SIGTERM while a request is in flight; 143 for tail on SIGTERM too', async () => {
      const silent = await startEndpoint();
      let answer!: () => void;
      const answered = new Promise<Reply>((resolve) => {
        answer = () => resolve({ status: 404 });
      });
      silent.reply(() => answered);
      try {
        const target: Target = { url: silent.url, env: { SLUICE_URL: silent.url, SLUICE_API_KEY: 'k' } };
        for (const [signal, code, said] of [
          ['SIGINT', 130, 'interrupted'],
          ['SIGTERM', 143, 'terminated'],
        ] as const) {
          const { child, output, exited } = spawnCli(target, ['tasks', 'list']);
          await silent.waitFor(signal === 'SIGINT' ? 1 : 2);
          child.kill(signal);
          expect(await exited, signal).toBe(code);
          expect(output.stderr).toBe(`sluice: ${said}\n`);
        }
      } finally {
        answer();
        await silent.close();
      }
      await enqueue(as.writer, { queue: 'sigq', url: `${endpoint.url}/ok`, delay_ms: 600_000 });
      const shim = [`${BIN}/node`, '--no-experimental-strip-types', 'src/cli/sluice.mjs'];
      for (const command of [BIN_SLUICE, shim]) {
        const tail = startTail(as.reader, ['--queue', 'sigq', '--lines', '1'], { command });
        await tail.waitFor((l) => /\brecent\b/.test(l), 'the queued task');
        expect(await tail.terminate(), command.join(' ')).toBe(143);
        expect(tail.stderr()).toBe('');
      }
    });

    it("4 for an internal error, with its stack: here an answer shaped unlike the API's", async () => {
      const odd = await startEndpoint();
      odd.reply(() => ({ status: 200, headers: { 'content-type': 'application/json' }, body: '{}' }));
      try {
        const target: Target = { url: odd.url, env: { SLUICE_URL: odd.url, SLUICE_API_KEY: 'k' } };
        const text = await sluice(target, ['tasks', 'get', '1']);
        expect(text).toMatchObject({ code: 4, stdout: '' });
        expect(text.stderr).toMatch(
          /^sluice: internal error \(a bug: please report it\): TypeError: .*\n {4}at [\s\S]*src\/cli\/commands\/tasks\.ts:/,
        );
        const asJson = await sluice(target, ['tasks', 'get', '1', '--json']);
        expect(asJson.code).toBe(0); // --json passes the answer through untouched
        const listed = await sluice(target, ['tasks', 'list', '--json']);
        expect(listed.code).toBe(4);
        expect(JSON.parse(listed.stderr)).toMatchObject({ code: 'internal', detail: expect.stringMatching(/^TypeError: /) });
        expect(JSON.parse(listed.stderr).stack).toMatch(/\n {4}at /);
      } finally {
        await odd.close();
      }
    });

    it('3 when Sluice cannot be reached, or fails (5xx)', async () => {
      const closed = `http://127.0.0.1:${await freePort()}`;
      const unreachable = await sluice(as.reader, ['status', '--url', closed]);
      expect(unreachable.code).toBe(3);
      expect(unreachable.stderr).toMatch(new RegExp(`^sluice: cannot reach Sluice at ${closed}: .*ECONNREFUSED`));
      const asJson = await sluice(as.reader, ['tasks', 'list', '--json', '--url', closed]);
      expect(asJson.code).toBe(3);
      expect(JSON.parse(asJson.stderr)).toMatchObject({ code: 'unreachable' });
      const down = await sluice(as.reader, ['status', '--url', broken.url]);
      expect(down.code).toBe(3);
      expect(down.stderr).toMatch(/^sluice: 503 database_unavailable: .* \(retry after 1 s\)\n$/);
    });
  });

  describe('what a server says', () => {
    it('reaches the terminal escaped: a problem, its issues and a redirect, from a server that misbehaves', async () => {
      const rogue = await startEndpoint();
      rogue.reply(
        (request): Reply =>
          request.path === '/v1/tasks/1'
            ? {
                status: 400,
                headers: { 'content-type': 'application/problem+json' },
                body: JSON.stringify({
                  code: 'bad\u001b[0m',
                  detail: 'see \u001b]0;owned\u0007 \u202etxt.exe',
                  issues: [{ path: 'id\u2066', message: 'no\u009b2J\u200f' }],
                }),
              }
            : // Node sends U+009B as the byte 0x9b, which fetch reads back as U+009B (C1 CSI).
              { status: 302, headers: { location: 'http://elsewhere/\u009b2J' } },
      );
      try {
        const target: Target = { url: rogue.url, env: { SLUICE_URL: rogue.url, SLUICE_API_KEY: 'k' } };
        const problem = await sluice(target, ['tasks', 'get', '1']);
        expect(problem).toMatchObject({ code: 1, stdout: '' });
        expect(problem.stderr).toBe(
          'sluice: 400 bad\\u001b[0m: see \\u001b]0;owned\\u0007 \\u202etxt.exe\n  id\\u2066: no\\u009b2J\\u200f\n',
        );
        const redirect = await sluice(target, ['tasks', 'get', '2']);
        expect(redirect.code).toBe(3);
        expect(redirect.stderr).toBe(
          `sluice: ${rogue.url}/v1/tasks/2 answered 302, redirecting to http://elsewhere/\\u009b2J: give that URL instead\n`,
        );
      } finally {
        await rogue.close();
      }
    });
  });

  describe('status and queues', () => {
    it('status shows counts, limits with their source and paused; queues set, pause, resume and reset change them', async () => {
      await Promise.all([1, 2].map(() => enqueue(as.writer, { queue: 'envq', url: `${endpoint.url}/keep`, delay_ms: 600_000 })));
      const all = await json<{ queues: Array<Record<string, unknown>> }>(sluice(as.reader, ['status', '--json']));
      await expectDocumented('GET', `${server.url}/v1/queues`, all);
      expect(all.queues.find((q) => q.name === 'envq')).toMatchObject({
        concurrency: { value: 7, source: 'env' },
        paused: { value: false, source: 'default' },
        counts: { pending: 2, leased: 0, waiting: 0, dead: 0 },
      });
      const text = await sluice(as.reader, ['status']);
      expect(text.stdout).toMatch(/^QUEUE +PENDING +LEASED +WAITING +DEAD +SUCCEEDED +CONCURRENCY/);
      expect(text.stdout).toMatch(
        /\nenvq +2 +0 +0 +0 +- +7 \(env\) +none \(default\) +none \(default\) +none \(default\) +0 \(default\) +no \(default\)\n/,
      );
      // Succeeded tasks come from GET /metrics, which a reader's key may not see.
      expect(text.stderr).toBe('sluice: succeeded counts need a key with metrics:read or admin (they come from GET /metrics)\n');

      const set = await json(
        sluice(as.admin, ['queues', 'set', 'envq', '--concurrency', '3', '--key-concurrency', '2', '--priority', '-1', '--json']),
      );
      expect(set).toMatchObject({ concurrency: { value: 3, source: 'override' }, key_concurrency: { value: 2, source: 'override' } });
      expect(await row('select options from sluice.queues where name = $1', ['envq'])).toEqual({
        options: { concurrency: 3, key_concurrency: 2, priority: -1 },
      });
      const unset = await sluice(as.admin, ['queues', 'set', 'envq', '--concurrency', 'unset']);
      expect(unset.stdout).toMatch(/concurrency +7 \(env\)/);
      expect(await row('select options from sluice.queues where name = $1', ['envq'])).toEqual({
        options: { key_concurrency: 2, priority: -1 },
      });
      const rated = await sluice(as.admin, ['queues', 'set', 'envq', '--rate', '10/1s', '--key-rate', '3/1m', '--priority', 'unset']);
      expect(rated.stdout).toMatch(/\nrate +10\/1s \(override\)\nkey rate +3\/1m \(override\)\n/);
      expect(await row('select options from sluice.queues where name = $1', ['envq'])).toEqual({
        options: { key_concurrency: 2, rate: { limit: 10, period_ms: 1_000 }, key_rate: { limit: 3, period_ms: 60_000 } },
      });
      expect((await sluice(as.admin, ['queues', 'set', 'envq', '--rate', '10'])).code).toBe(2);
      await json(sluice(as.admin, ['queues', 'set', 'envq', '--rate', 'unset', '--json']));
      expect(await row('select options from sluice.queues where name = $1', ['envq'])).toEqual({
        options: { key_concurrency: 2, key_rate: { limit: 3, period_ms: 60_000 } },
      });

      expect((await sluice(as.admin, ['queues', 'pause', 'envq'])).stdout).toMatch(/paused +yes \(override\)/);
      expect(await row('select paused from sluice.queues where name = $1', ['envq'])).toEqual({ paused: true });
      await json(sluice(as.admin, ['queues', 'resume', 'envq', '--json']));
      expect(await row('select paused from sluice.queues where name = $1', ['envq'])).toEqual({ paused: false });
      const reset = await json(sluice(as.admin, ['queues', 'reset', 'envq', '--json']));
      expect(reset).toMatchObject({ concurrency: { value: 7, source: 'env' }, key_concurrency: { value: null, source: 'default' } });
      expect(await row('select 1 from sluice.queues where name = $1', ['envq'])).toBeUndefined();
      expect((await sluice(as.admin, ['queues', 'reset', 'envq'])).code).toBe(1);
    });

    it('status counts succeeded tasks as a dispatcher last counted them, for a key that may read /metrics', async () => {
      const ids = await Promise.all([1, 2].map(() => enqueue(as.writer, { queue: 'doneq', url: `${endpoint.url}/ok` })));
      await until(async () => (await Promise.all(ids.map(taskRow))).every((r) => r?.status === 'succeeded'), 'the tasks to succeed');
      await taskCountsRefresh(t.db, 0);
      const all = await json<{ queues: Array<{ name: string; counts: object }>; succeeded_counted_at: string }>(
        sluice(as.admin, ['status', '--json']),
      );
      expect(all.queues.find((q) => q.name === 'doneq')!.counts).toEqual({ pending: 0, leased: 0, waiting: 0, dead: 0, succeeded: 2 });
      expect(Date.parse(all.succeeded_counted_at)).not.toBeNaN();
      const one = await sluice(as.admin, ['status', 'doneq']);
      expect(one.stdout).toMatch(/tasks +0 pending, 0 leased, 0 waiting, 0 dead, 2 succeeded\n/);
      expect(one.stdout).toMatch(/\nsucceeded: within the retention window, as counted \d+m?s ago\n/);
      const reader = await json<{ queue: { counts: object }; succeeded_counted_at: null }>(
        sluice(as.reader, ['status', 'doneq', '--json']),
      );
      expect(reader).toMatchObject({ queue: { counts: { succeeded: null } }, succeeded_counted_at: null });
    });

    it('keys set and clear a key limit; status QUEUE shows it and every slot holder', async () => {
      const set = await json(sluice(as.admin, ['keys', 'set', 'kq', 'tenant/1 ü', '--limit', '4', '--json']));
      expect(set).toEqual({ queue: 'kq', key: 'tenant/1 ü', limit: 4, source: 'override' });
      expect(await row('select "limit" from sluice.key_limits where queue = $1 and concurrency_key = $2', ['kq', 'tenant/1 ü'])).toEqual({
        limit: 4,
      });
      const id = await enqueue(as.writer, { queue: 'kq', url: `${endpoint.url}/keep`, concurrency_key: 'tenant/1 ü' });
      await until(async () => (await taskRow(id))?.status === 'leased', 'the task to be leased');
      const one = await json<{
        queue: object;
        concurrency: { keys: Array<{ key: string; limit: number; slots: Array<{ task_id: string }> }> };
      }>(sluice(as.reader, ['status', 'kq', '--json']));
      await expectDocumented('GET', `${server.url}/v1/queues/kq/concurrency`, one.concurrency);
      expect(one.concurrency.keys).toEqual([
        expect.objectContaining({ key: 'tenant/1 ü', limit: 4, slots: [expect.objectContaining({ task_id: id })] }),
      ]);
      const text = (await sluice(as.reader, ['status', 'kq'])).stdout;
      expect(text).toMatch(/key +tenant\/1 ü +4 \(override\) +1/);
      expect(text).toContain(String((await taskRow(id))!.lease_id));

      expect(await json(sluice(as.admin, ['keys', 'clear', 'kq', 'tenant/1 ü', '--json']))).toEqual({
        queue: 'kq',
        key: 'tenant/1 ü',
        cleared: true,
      });
      expect(await row('select 1 from sluice.key_limits where queue = $1', ['kq'])).toBeUndefined();
      expect((await sluice(as.admin, ['keys', 'clear', 'kq', 'tenant/1 ü'])).code).toBe(1);
      expect((await sluice(as.admin, ['keys', 'set', 'kq', '', '--limit', '2'])).code).toBe(2);
    });

    it('refuses keys and other path parts named "." or "..", which URLs read as folders, sending nothing', async () => {
      await json(sluice(as.admin, ['queues', 'set', 'dotq', '--concurrency', '3', '--json']));
      // Sent, they were other requests: `keys clear dotq ..` a DELETE of /v1/queues/dotq/, which
      // this server answers 404, no route; a laxer router would have reset the queue.
      const cases: Array<[string[], RegExp]> = [
        [['keys', 'clear', 'dotq', '..'], /^sluice: the key "\.\." cannot be named in the API's path/],
        [['keys', 'set', 'dotq', '..', '--limit', '3'], /^sluice: the key "\.\." cannot be named/],
        [['keys', 'set', 'dotq', '.', '--limit', '3'], /^sluice: the key "\." cannot be named/],
        [['lease', 'release', 'dotq', '..', '--force'], /^sluice: "\.\." cannot be sent as a part of a URL path/],
        [['tasks', 'get', '.'], /^sluice: "\." cannot be sent as a part of a URL path/],
        [['tasks', 'retry', '.'], /^sluice: "\." cannot be sent/],
        [['status', '..'], /^sluice: "\.\." cannot be sent/],
      ];
      for (const [args, message] of cases) {
        const r = await sluice(as.admin, args);
        expect(r.code, args.join(' ')).toBe(2);
        expect(r.stderr, args.join(' ')).toMatch(message);
      }
      expect(await row('select options from sluice.queues where name = $1', ['dotq'])).toEqual({ options: { concurrency: 3 } });
      expect(await row('select count(*)::int as n from sluice.key_limits where queue = $1', ['dotq'])).toEqual({ n: 0 });
    });

    it('lease release frees a held lease only with --force', async () => {
      const id = await enqueue(as.writer, { queue: 'stuck', url: `${endpoint.url}/keep`, lease_ms: 600_000, timeout_ms: 5_000 });
      const lease = await until(async () => (await taskRow(id))?.lease_id as string | null, 'the lease');
      // Paused, so that the released task stays pending instead of being pushed again at once.
      await json(sluice(as.admin, ['queues', 'pause', 'stuck', '--json']));

      const refused = await sluice(as.admin, ['lease', 'release', 'stuck', lease]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/not released: .* Add --force/);
      expect(await taskRow(id)).toMatchObject({ status: 'leased', lease_id: lease });

      const released = await json(sluice(as.admin, ['lease', 'release', 'stuck', lease, '--force', '--json']));
      expect(released).toEqual({ released: true, task_id: id, lease_id: lease });
      expect(await taskRow(id)).toMatchObject({ status: 'pending', lease_id: null, attempts: 0 });
      const task = await api<{ attempt_history: unknown[] }>(as.reader, `/v1/tasks/${id}`);
      expect(task.attempt_history).toEqual([expect.objectContaining({ lease_id: lease, outcome: 'released' })]);
      expect((await sluice(as.admin, ['lease', 'release', 'stuck', lease, '--force'])).code).toBe(1);
    });
  });

  describe('tasks', () => {
    it('enqueue writes the task; get shows it; list filters by queue, status and key and pages', async () => {
      const made = await json<{ id: string; deduplicated: boolean }>(
        sluice(as.writer, [
          'tasks',
          'enqueue',
          '--endpoint',
          `${endpoint.url}/ok`,
          '--queue',
          'tq',
          '--body',
          '{"n":1}',
          '--key',
          'a',
          '--dedup-key',
          'd1',
          '--delay',
          '600000',
          '--json',
        ]),
      );
      await expectDocumented('POST', `${server.url}/v1/tasks`, made);
      expect(made.deduplicated).toBe(false);
      expect(await taskRow(made.id)).toMatchObject({ status: 'pending', queue: 'tq', concurrency_key: 'a', body: '{"n":1}' });
      const again = await sluice(as.writer, [
        'tasks',
        'enqueue',
        '--data',
        JSON.stringify({ url: `${endpoint.url}/ok`, queue: 'tq', dedup_key: 'd1' }),
      ]);
      expect(again.stdout).toBe(`deduplicated: task ${made.id} (queue tq): pending\n`);
      const other = await enqueue(as.writer, { queue: 'tq', url: `${endpoint.url}/ok`, concurrency_key: 'b', delay_ms: 600_000 });

      const got = await json<{ id: string; body: unknown }>(sluice(as.reader, ['tasks', 'get', made.id, '--json']));
      await expectDocumented('GET', `${server.url}/v1/tasks/${made.id}`, got);
      expect(got).toMatchObject({ id: made.id, body: { n: 1 } });
      expect((await sluice(as.reader, ['tasks', 'get', made.id])).stdout).toMatch(/body +application\/json: \{"n":1\}/);

      const byKey = await json<{ tasks: Array<{ id: string }> }>(
        sluice(as.reader, ['tasks', 'list', '--queue', 'tq', '--key', 'b', '--json']),
      );
      await expectDocumented('GET', `${server.url}/v1/tasks`, byKey);
      expect(byKey.tasks.map((x) => x.id)).toEqual([other]);
      const pending = await json<{ tasks: Array<{ id: string }> }>(
        sluice(as.reader, ['tasks', 'list', '--queue', 'tq', '--status', 'pending', '--json']),
      );
      expect(pending.tasks.map((x) => x.id)).toEqual([other, made.id]);
      const first = await sluice(as.reader, ['tasks', 'list', '--queue', 'tq', '--limit', '1']);
      expect(first.stdout).toMatch(new RegExp(`^ID +QUEUE +STATUS +KEY +ATTEMPTS[^\\n]*\\n${other} +tq +pending +b +0/5`));
      const cursor = /more: --cursor (\S+)/.exec(first.stderr)?.[1];
      const rest = await json<{ tasks: Array<{ id: string }> }>(
        sluice(as.reader, ['tasks', 'list', '--queue', 'tq', '--cursor', cursor!, '--json']),
      );
      expect(rest.tasks.map((x) => x.id)).toEqual([made.id]);
      expect((await sluice(as.reader, ['tasks', 'list', '--status', 'finished'])).code).toBe(1);
    });

    it('list --limit beyond one page of the API follows its cursor', async () => {
      const tasks = Array.from({ length: 620 }, (_, n) => ({ queue: 'many', url: `${endpoint.url}/ok`, delay_ms: 600_000, body: { n } }));
      await api(as.writer, '/v1/tasks/batch', { method: 'POST', body: JSON.stringify({ tasks }) });
      const listed = await json<{ tasks: Array<{ id: string }>; next_cursor: string | null }>(
        sluice(as.reader, ['tasks', 'list', '--queue', 'many', '--limit', '610', '--json']),
      );
      const ids = (await t.db.query<{ id: string }>(`select id::text from sluice.all_tasks t where queue = 'many' order by t.id desc`)).map(
        (r) => r.id,
      );
      expect(listed.tasks.map((x) => x.id)).toEqual(ids.slice(0, 610));
      expect(listed.next_cursor).not.toBeNull();
    });

    it('retry redrives a dead task, and cancel cancels a pending one', async () => {
      const id = await enqueue(as.writer, { queue: 'rq', url: `${endpoint.url}/fail-once`, max_attempts: 1 });
      await until(async () => (await taskRow(id))?.status === 'dead', 'the task to die');
      const notDead = await sluice(as.writer, ['tasks', 'cancel', id]);
      expect(notDead.code).toBe(1);
      expect(notDead.stderr).toMatch(/409 already_finished/);
      const retried = await json<{ status: string }>(sluice(as.writer, ['tasks', 'retry', id, '--json']));
      expect(retried.status).toBe('pending');
      await until(async () => (await taskRow(id))?.status === 'succeeded', 'the redriven task to succeed');

      const later = await enqueue(as.writer, { queue: 'rq', url: `${endpoint.url}/ok`, delay_ms: 600_000 });
      expect((await sluice(as.writer, ['tasks', 'retry', later])).stderr).toMatch(/409 not_dead/);
      expect((await sluice(as.writer, ['tasks', 'cancel', later])).stdout).toBe(`task ${later} (queue rq): cancelled\n`);
      expect(await taskRow(later)).toMatchObject({ status: 'cancelled' });
    });
  });

  describe('tail', () => {
    it('prints a new task and its finish, as JSON lines, and ends with 0 on Ctrl-C', async () => {
      const before = await enqueue(as.writer, { queue: 'tailq', url: `${endpoint.url}/ok` });
      await until(async () => (await taskRow(before))?.status === 'succeeded', 'the first task');
      const tail = startTail(as.reader, ['--queue', 'tailq', '--interval', '100', '--lines', '1', '--json']);
      await tail.waitFor((l) => JSON.parse(l).event === 'recent', 'the recent task');
      const id = await enqueue(as.writer, { queue: 'tailq', url: `${endpoint.url}/fail-once`, backoff: { initial_ms: 300 } });
      await tail.waitFor((l) => JSON.parse(l).event === 'finished' && JSON.parse(l).task.id === id, 'the finish');
      expect(await tail.interrupt()).toBe(0);
      const events = tail.lines().map((l) => JSON.parse(l) as { event: string; task: { id: string; status: string } });
      expect(events[0]).toMatchObject({ event: 'recent', task: { id: before, status: 'succeeded' } });
      expect(events.filter((e) => e.task.id === id).map((e) => e.event)).toEqual(expect.arrayContaining(['new', 'finished']));
      expect(events.at(-1)).toMatchObject({ event: 'finished', task: { id, status: 'succeeded' } });
      expect(await taskRow(id)).toMatchObject({ status: 'succeeded', attempts: 2 });
      expect(tail.stderr()).toBe('');
    });

    it('reports a task whose enqueue commits after a newer task was seen, once', async () => {
      // Two tasks before tail starts: the older one is neither shown (--lines 1) nor, later, new.
      await enqueue(as.writer, { queue: 'lateq', url: `${endpoint.url}/ok`, delay_ms: 600_000 });
      const before = await enqueue(as.writer, { queue: 'lateq', url: `${endpoint.url}/ok`, delay_ms: 600_000 });
      const tail = startTail(as.reader, ['--queue', 'lateq', '--interval', '100', '--lines', '1', '--json']);
      await tail.waitFor((l) => JSON.parse(l).task.id === before, 'the task before');
      // An enqueue that takes its id now and commits later, as a slow transaction does (in a lane
      // of its own: an enqueue holds its lane's row until it commits).
      let commit!: () => void;
      const held = new Promise<void>((resolve) => {
        commit = resolve;
      });
      let took!: (id: string) => void;
      const lateId = new Promise<string>((resolve) => {
        took = resolve;
      });
      const transaction = t.db.transaction(async (tx) => {
        const [inserted] = await tx.query<{ id: string }>(
          `insert into sluice.tasks (queue, url, concurrency_key, max_attempts, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, timeout_ms, lease_ms, run_at)
           values ('lateq', 'https://example.com', 'slow', 1, 1000, 1000, 2, 0, 1000, 2000, now() + interval '1 hour') returning id::text`,
        );
        took(inserted!.id);
        await held;
      });
      try {
        const late = await lateId;
        const newer = await enqueue(as.writer, { queue: 'lateq', url: `${endpoint.url}/ok`, delay_ms: 600_000 });
        expect(BigInt(newer)).toBeGreaterThan(BigInt(late));
        await tail.waitFor((l) => JSON.parse(l).task.id === newer, 'the newer task');
        commit();
        await transaction;
        await tail.waitFor((l) => JSON.parse(l).task.id === late, 'the task committed late');
        // A later poll, which re-reads both within its look-back, reports neither again.
        const last = await enqueue(as.writer, { queue: 'lateq', url: `${endpoint.url}/ok`, delay_ms: 600_000 });
        await tail.waitFor((l) => JSON.parse(l).task.id === last, 'the last task');
        expect(await tail.interrupt()).toBe(0);
        const events = tail.lines().map((l) => JSON.parse(l) as { event: string; task: { id: string } });
        expect(events.map((e) => [e.event, e.task.id])).toEqual([
          ['recent', before],
          ['new', newer],
          ['new', late],
          ['new', last],
        ]);
      } finally {
        commit();
        await transaction;
      }
    });

    it('after an empty first poll, reports each task as new, those that arrive finished too (--lines 0)', async () => {
      // Sluice behind a relay that counts the listings it passes on: the test knows when tail first polled.
      const relay = await startEndpoint();
      let listings = 0;
      relay.reply(async (request) => {
        const answer = await fetch(`${server.url}${request.path}`, { headers: { authorization: `${request.headers.authorization}` } });
        const body = await answer.text();
        if (request.path.startsWith('/v1/tasks?')) listings++;
        return { status: answer.status, headers: { 'content-type': 'application/json' }, body };
      });
      try {
        const target: Target = { url: relay.url, env: { SLUICE_URL: relay.url, SLUICE_API_KEY: secrets.readKey } };
        const tail = startTail(target, ['--queue', 'emptyq', '--interval', '100', '--lines', '0', '--json']);
        await until(async () => listings >= 1, 'the first poll');
        // Three tasks that finished before any poll saw them, committed together.
        const ids = (
          await t.db.query<{ id: string }>(
            `insert into sluice.tasks (queue, url, status, finished_at, max_attempts, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, timeout_ms, lease_ms)
             select 'emptyq', 'https://example.com', 'succeeded', now(), 1, 1000, 1000, 2, 0, 1000, 2000 from generate_series(1, 3) returning id::text`,
          )
        )
          .map((r) => r.id)
          .sort((a, b) => Number(BigInt(a) - BigInt(b)));
        await tail.waitFor((l) => JSON.parse(l).event === 'finished' && JSON.parse(l).task.id === ids[2], 'the last finish');
        expect(await tail.interrupt()).toBe(0);
        const events = tail.lines().map((l) => JSON.parse(l) as { event: string; task: { id: string } });
        expect(events.map((e) => [e.event, e.task.id])).toEqual(
          ids.flatMap((id) => [
            ['new', id],
            ['finished', id],
          ]),
        );
      } finally {
        await relay.close();
      }
    });
  });

  describe('a closed output', () => {
    it('ends tail with 0 at the next line it prints, as `sluice tail | head -1` needs, under Node (and its shim), Bun and Deno', async () => {
      const commands = [
        BIN_SLUICE,
        [`${BIN}/node`, '--no-experimental-strip-types', 'src/cli/sluice.mjs'],
        [`${BIN}/bun`, 'src/cli/sluice.mjs'],
        [`${BIN}/deno`, 'run', '-A', 'src/cli/sluice.mjs'],
      ];
      for (const command of commands) {
        const queue = `pipe-${commands.indexOf(command)}`;
        const before = await enqueue(as.writer, { queue, url: `${endpoint.url}/ok`, delay_ms: 600_000 });
        const tail = startTail(as.reader, ['--queue', queue, '--interval', '100', '--lines', '1'], { command });
        await tail.waitFor((l) => l.includes(` ${before} `), 'the task before');
        tail.closeOutput();
        await enqueue(as.writer, { queue, url: `${endpoint.url}/ok`, delay_ms: 600_000 });
        expect(await within(tail.exited, 10_000, 'tail to end'), command.join(' ')).toBe(0);
        expect(tail.stderr()).toBe('');
      }
    });
  });

  describe('runtimes', () => {
    it('runs under a Node that cannot strip types (through the project Node), Bun, Deno and npx', async () => {
      const id = await enqueue(as.writer, { queue: 'rt', url: `${endpoint.url}/ok`, delay_ms: 600_000 });
      const commands = [
        [`${BIN}/node`, '--no-experimental-strip-types', 'src/cli/sluice.mjs'],
        [`${BIN}/bun`, 'src/cli/sluice.mjs'],
        [`${BIN}/deno`, 'run', '-A', 'src/cli/sluice.mjs'],
        ['npx', '--no', 'sluice'],
      ];
      for (const command of commands) {
        const got = await json<{ id: string }>(sluice(as.reader, ['tasks', 'get', id, '--json'], { command }));
        expect(got.id, command.join(' ')).toBe(id);
      }
    });

    it('passes Ctrl-C on to the project Node it re-runs under', async () => {
      await enqueue(as.writer, { queue: 'rt2', url: `${endpoint.url}/ok`, delay_ms: 600_000 });
      const command = [`${BIN}/node`, '--no-experimental-strip-types', 'src/cli/sluice.mjs'];
      const tail = startTail(as.reader, ['--queue', 'rt2', '--lines', '1'], { command });
      await tail.waitFor((l) => /\brecent\b/.test(l), 'the queued task');
      // SIGINT to the shim alone (a terminal would send it to both).
      expect(await tail.interrupt()).toBe(0);
    });
  });

  describe('tail when Sluice goes away', () => {
    it('says so on stderr, keeps polling, and goes on once Sluice answers again', async () => {
      const port = await freePort();
      const env = testEnv(secrets, t.url, { SLUICE_API_KEYS: withAdmin(secrets) });
      let api = await startNodeSluice({ env, port, dispatch: false });
      const target: Target = { url: api.url, env: { SLUICE_URL: api.url, SLUICE_API_KEY: secrets.apiKey } };
      const before = await enqueue(target, { queue: 'away', url: `${endpoint.url}/ok`, delay_ms: 600_000 });
      const tail = startTail(target, ['--queue', 'away', '--interval', '100', '--lines', '1']);
      await tail.waitFor((l) => new RegExp(`recent +${before} `).test(l), 'the task before');
      await api.close();
      await until(async () => tail.stderr().includes('cannot reach Sluice'), 'a warning on stderr');
      expect(tail.stderr()).toMatch(/^sluice: cannot reach Sluice at .* \(tail goes on trying\)\n/);
      api = await startNodeSluice({ env, port, dispatch: false });
      try {
        const after = await enqueue(target, { queue: 'away', url: `${endpoint.url}/ok`, delay_ms: 600_000 });
        await tail.waitFor((l) => new RegExp(`new +${after} `).test(l), 'the task after');
        expect(await tail.interrupt()).toBe(0);
      } finally {
        await api.close();
      }
    });
  });
});

describe('sluice against the Worker', () => {
  const f = useWorkerFixture((f) => ({ SLUICE_API_KEYS: withAdmin(f.secrets) }));
  const target = (key: string): Target => ({ url: f.worker.url, env: { SLUICE_URL: f.worker.url, SLUICE_API_KEY: key } });
  const taskRow = async (id: string) =>
    (
      await f.t.db.query<{ status: string; lease_id: string | null }>('select status, lease_id from sluice.all_tasks where id = $1', [id])
    )[0];
  beforeAll(() => replies(f.endpoint));

  it('tail prints a task enqueued with the CLI and its finish; status and queues set see and change the queue', async () => {
    const enqueueWithCli = () =>
      json<{ id: string }>(
        sluice(target(f.secrets.apiKey), ['tasks', 'enqueue', '--endpoint', `${f.endpoint.url}/ok`, '--queue', 'wq', '--json']),
      );
    const first = await enqueueWithCli();
    await until(async () => (await taskRow(first.id))?.status === 'succeeded', 'the first task');
    const tail = startTail(target(f.secrets.readKey), ['--queue', 'wq', '--interval', '100', '--lines', '1']);
    expect(await tail.waitFor((l) => /\brecent\b/.test(l), 'the first task')).toMatch(
      new RegExp(`recent +${first.id} +wq +- +succeeded +1/5$`),
    );
    const made = await enqueueWithCli();
    const finished = await tail.waitFor((l) => /\bfinished\b/.test(l), 'the finish');
    expect(finished).toMatch(new RegExp(`^\\S+Z +finished +${made.id} +wq +- +succeeded +1/5$`));
    expect(await tail.interrupt()).toBe(0);
    expect(await taskRow(made.id)).toMatchObject({ status: 'succeeded' });

    const admin = target(adminKey.key);
    expect((await sluice(admin, ['queues', 'set', 'wq', '--concurrency', '2'])).stdout).toMatch(/concurrency +2 \(override\)/);
    const one = await json<{ queue: object; concurrency: object }>(sluice(admin, ['status', 'wq', '--json']));
    await expectDocumented('GET', `${f.worker.url}/v1/queues/wq`, one.queue);
    expect(one.queue).toMatchObject({ concurrency: { value: 2, source: 'override' } });
    expect((await f.t.db.query('select options from sluice.queues where name = $1', ['wq']))[0]).toEqual({ options: { concurrency: 2 } });
  });

  it('lease release --force frees a lease the endpoint keeps', async () => {
    const admin = target(adminKey.key);
    const id = await enqueue(admin, { queue: 'wstuck', url: `${f.endpoint.url}/keep`, lease_ms: 600_000, timeout_ms: 5_000 });
    const lease = await until(async () => (await taskRow(id))?.lease_id, 'the lease');
    await json(sluice(admin, ['queues', 'pause', 'wstuck', '--json']));
    expect((await sluice(admin, ['lease', 'release', 'wstuck', lease])).code).toBe(2);
    expect(await taskRow(id)).toMatchObject({ status: 'leased', lease_id: lease });
    expect((await sluice(admin, ['lease', 'release', 'wstuck', lease, '--force'])).stdout).toBe(
      `released lease ${lease}: task ${id} is pending again, its attempt given back\n`,
    );
    expect(await taskRow(id)).toMatchObject({ status: 'pending', lease_id: null });
  });
});
