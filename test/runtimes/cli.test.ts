/**
 * The `sluice` CLI (src/cli) as a user runs it: the real bin as a child process, against the
 * Node server on a test database (here: help, exit codes, what a server says, status and
 * queues; cli-tasks.test.ts has tasks and tail, cli-worker.test.ts the Worker). Every
 * command's effect is checked in the database or through the API, not only in what the CLI
 * prints; `--json` output is checked against /openapi.json where it is an API answer passed through.
 */
import { describe, expect, it } from 'vitest';
import { GLOBAL_FLAGS } from '../../src/cli/args.ts';
import { COMMANDS } from '../../src/cli/commands/index.ts';
import { taskCountsRefresh } from '../../src/db/metrics.ts';
import { freePort } from '../../src/node/postgres.ts';
import {
  api,
  BIN_SLUICE,
  enqueue,
  expectDocumented,
  json,
  sluice,
  spawnCli,
  startTail,
  type Target,
  until,
  useNodeCli,
} from '../helpers/cli.ts';
import { type Reply, startEndpoint } from '../helpers/endpoint.ts';
import { BIN } from '../helpers/process.ts';

describe('sluice against the Node server', () => {
  const cli = useNodeCli();

  describe('help', () => {
    it('lists every command, and each command names all of its flags and the global ones', async () => {
      const main = await sluice(cli.as.reader, ['--help']);
      expect(main.code).toBe(0);
      for (const c of COMMANDS) expect(main.stdout).toContain(c.words.join(' '));
      expect(main.stdout).toMatch(
        /Exit codes:[\s\S]*\b1\b.*4xx[\s\S]*\b2\b.*usage[\s\S]*\b3\b.*5xx[\s\S]*\b4\b.*internal[\s\S]*\b143\b.*SIGTERM/,
      );
      const helps = await Promise.all(COMMANDS.map((c) => sluice(cli.as.reader, [...c.words, '--help'], { env: { SLUICE_URL: '' } })));
      COMMANDS.forEach((c, i) => {
        expect(helps[i]!.code, c.words.join(' ')).toBe(0);
        for (const f of [...c.flags, ...GLOBAL_FLAGS])
          expect(helps[i]!.stdout, `${c.words.join(' ')} --${f.name}`).toContain(`--${f.name}`);
      });
      expect((await sluice(cli.as.reader, ['help', 'tail'])).stdout).toContain('How it works');
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
        const r = await sluice(cli.as.admin, args);
        expect(r.code, args.join(' ')).toBe(2);
        expect(r.stderr).toMatch(message);
      }
      const noUrl = await sluice(cli.as.reader, ['status'], { env: { SLUICE_URL: '' } });
      expect(noUrl).toMatchObject({ code: 2, stdout: '' });
      expect(noUrl.stderr).toContain('set SLUICE_URL or give --url');
      const asJson = await sluice(cli.as.reader, ['status', '--json'], { env: { SLUICE_API_KEY: '' } });
      expect(asJson.code).toBe(2);
      expect(JSON.parse(asJson.stderr)).toEqual({ code: 'usage', detail: 'no API key: set SLUICE_API_KEY or give --api-key' });
    });

    it('1 when the API refuses (4xx), with its status, code and detail on stderr', async () => {
      const missing = await sluice(cli.as.reader, ['tasks', 'get', '999999']);
      expect(missing).toMatchObject({ code: 1, stdout: '' });
      expect(missing.stderr).toBe('sluice: 404 not_found: task 999999 was not found\n');
      const forbidden = await sluice(cli.as.reader, ['queues', 'pause', 'q1', '--json']);
      expect(forbidden.code).toBe(1);
      expect(JSON.parse(forbidden.stderr)).toMatchObject({ status: 403, code: 'forbidden' });
      expect(await cli.row('select paused from sluice.queues where name = $1', ['q1'])).toBeUndefined();
      const invalid = await sluice(cli.as.admin, ['keys', 'set', 'q1', 'k', '--limit', '0']);
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
      await enqueue(cli.as.writer, { queue: 'sigq', url: `${cli.endpoint.url}/ok`, delay_ms: 600_000 });
      const shim = [`${BIN}/node`, '--no-experimental-strip-types', 'src/cli/sluice.mjs'];
      for (const command of [BIN_SLUICE, shim]) {
        const tail = startTail(cli.as.reader, ['--queue', 'sigq', '--lines', '1'], { command });
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
      const unreachable = await sluice(cli.as.reader, ['status', '--url', closed]);
      expect(unreachable.code).toBe(3);
      expect(unreachable.stderr).toMatch(new RegExp(`^sluice: cannot reach Sluice at ${closed}: .*ECONNREFUSED`));
      const asJson = await sluice(cli.as.reader, ['tasks', 'list', '--json', '--url', closed]);
      expect(asJson.code).toBe(3);
      expect(JSON.parse(asJson.stderr)).toMatchObject({ code: 'unreachable' });
      const down = await sluice(cli.as.reader, ['status', '--url', cli.broken.url]);
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
      await Promise.all([1, 2].map(() => enqueue(cli.as.writer, { queue: 'envq', url: `${cli.endpoint.url}/keep`, delay_ms: 600_000 })));
      const all = await json<{ queues: Array<Record<string, unknown>> }>(sluice(cli.as.reader, ['status', '--json']));
      await expectDocumented('GET', `${cli.server.url}/v1/queues`, all);
      expect(all.queues.find((q) => q.name === 'envq')).toMatchObject({
        concurrency: { value: 7, source: 'env' },
        paused: { value: false, source: 'default' },
        counts: { pending: 2, leased: 0, waiting: 0, dead: 0 },
      });
      const text = await sluice(cli.as.reader, ['status']);
      expect(text.stdout).toMatch(/^QUEUE +PENDING +LEASED +WAITING +DEAD +SUCCEEDED +CONCURRENCY/);
      expect(text.stdout).toMatch(
        /\nenvq +2 +0 +0 +0 +- +7 \(env\) +none \(default\) +none \(default\) +none \(default\) +0 \(default\) +no \(default\)\n/,
      );
      // Succeeded tasks come from GET /metrics, which a reader's key may not see.
      expect(text.stderr).toBe('sluice: succeeded counts need a key with metrics:read or admin (they come from GET /metrics)\n');

      const set = await json(
        sluice(cli.as.admin, ['queues', 'set', 'envq', '--concurrency', '3', '--key-concurrency', '2', '--priority', '-1', '--json']),
      );
      expect(set).toMatchObject({ concurrency: { value: 3, source: 'override' }, key_concurrency: { value: 2, source: 'override' } });
      expect(await cli.row('select options from sluice.queues where name = $1', ['envq'])).toEqual({
        options: { concurrency: 3, key_concurrency: 2, priority: -1 },
      });
      const unset = await sluice(cli.as.admin, ['queues', 'set', 'envq', '--concurrency', 'unset']);
      expect(unset.stdout).toMatch(/concurrency +7 \(env\)/);
      expect(await cli.row('select options from sluice.queues where name = $1', ['envq'])).toEqual({
        options: { key_concurrency: 2, priority: -1 },
      });
      const rated = await sluice(cli.as.admin, ['queues', 'set', 'envq', '--rate', '10/1s', '--key-rate', '3/1m', '--priority', 'unset']);
      expect(rated.stdout).toMatch(/\nrate +10\/1s \(override\)\nkey rate +3\/1m \(override\)\n/);
      expect(await cli.row('select options from sluice.queues where name = $1', ['envq'])).toEqual({
        options: { key_concurrency: 2, rate: { limit: 10, period_ms: 1_000 }, key_rate: { limit: 3, period_ms: 60_000 } },
      });
      expect((await sluice(cli.as.admin, ['queues', 'set', 'envq', '--rate', '10'])).code).toBe(2);
      await json(sluice(cli.as.admin, ['queues', 'set', 'envq', '--rate', 'unset', '--json']));
      expect(await cli.row('select options from sluice.queues where name = $1', ['envq'])).toEqual({
        options: { key_concurrency: 2, key_rate: { limit: 3, period_ms: 60_000 } },
      });
      const adaptive = await sluice(cli.as.admin, ['queues', 'set', 'envq', '--adaptive', 'true']);
      expect(adaptive.stdout).toMatch(/\nadaptive +yes \(override\)\n/);
      expect((await sluice(cli.as.admin, ['queues', 'set', 'envq', '--adaptive', 'maybe'])).code).toBe(2);
      await json(sluice(cli.as.admin, ['queues', 'set', 'envq', '--adaptive', 'unset', '--json']));
      expect(await cli.row('select options from sluice.queues where name = $1', ['envq'])).toEqual({
        options: { key_concurrency: 2, key_rate: { limit: 3, period_ms: 60_000 } },
      });

      expect((await sluice(cli.as.admin, ['queues', 'pause', 'envq'])).stdout).toMatch(/paused +yes \(override\)/);
      expect(await cli.row('select paused from sluice.queues where name = $1', ['envq'])).toEqual({ paused: true });
      await json(sluice(cli.as.admin, ['queues', 'resume', 'envq', '--json']));
      expect(await cli.row('select paused from sluice.queues where name = $1', ['envq'])).toEqual({ paused: false });
      const reset = await json(sluice(cli.as.admin, ['queues', 'reset', 'envq', '--json']));
      expect(reset).toMatchObject({ concurrency: { value: 7, source: 'env' }, key_concurrency: { value: null, source: 'default' } });
      expect(await cli.row('select 1 from sluice.queues where name = $1', ['envq'])).toBeUndefined();
      expect((await sluice(cli.as.admin, ['queues', 'reset', 'envq'])).code).toBe(1);
    });

    it('status counts succeeded tasks as a dispatcher last counted them, for a key that may read /metrics', async () => {
      const ids = await Promise.all([1, 2].map(() => enqueue(cli.as.writer, { queue: 'doneq', url: `${cli.endpoint.url}/ok` })));
      await until(async () => (await Promise.all(ids.map(cli.taskRow))).every((r) => r?.status === 'succeeded'), 'the tasks to succeed');
      await taskCountsRefresh(cli.t.db, 0);
      const all = await json<{ queues: Array<{ name: string; counts: object }>; succeeded_counted_at: string }>(
        sluice(cli.as.admin, ['status', '--json']),
      );
      expect(all.queues.find((q) => q.name === 'doneq')!.counts).toEqual({ pending: 0, leased: 0, waiting: 0, dead: 0, succeeded: 2 });
      expect(Date.parse(all.succeeded_counted_at)).not.toBeNaN();
      const one = await sluice(cli.as.admin, ['status', 'doneq']);
      expect(one.stdout).toMatch(/tasks +0 pending, 0 leased, 0 waiting, 0 dead, 2 succeeded\n/);
      expect(one.stdout).toMatch(/\nsucceeded: within the retention window, as counted \d+m?s ago\n/);
      const reader = await json<{ queue: { counts: object }; succeeded_counted_at: null }>(
        sluice(cli.as.reader, ['status', 'doneq', '--json']),
      );
      expect(reader).toMatchObject({ queue: { counts: { succeeded: null } }, succeeded_counted_at: null });
    });

    it('keys set and clear a key limit; status QUEUE shows it and every slot holder', async () => {
      const set = await json(sluice(cli.as.admin, ['keys', 'set', 'kq', 'tenant/1 ü', '--limit', '4', '--json']));
      expect(set).toEqual({ queue: 'kq', key: 'tenant/1 ü', limit: 4, source: 'override' });
      expect(
        await cli.row('select "limit" from sluice.key_limits where queue = $1 and concurrency_key = $2', ['kq', 'tenant/1 ü']),
      ).toEqual({
        limit: 4,
      });
      const id = await enqueue(cli.as.writer, { queue: 'kq', url: `${cli.endpoint.url}/keep`, concurrency_key: 'tenant/1 ü' });
      await until(async () => (await cli.taskRow(id))?.status === 'leased', 'the task to be leased');
      const one = await json<{
        queue: object;
        concurrency: { keys: Array<{ key: string; limit: number; slots: Array<{ task_id: string }> }> };
      }>(sluice(cli.as.reader, ['status', 'kq', '--json']));
      await expectDocumented('GET', `${cli.server.url}/v1/queues/kq/concurrency`, one.concurrency);
      expect(one.concurrency.keys).toEqual([
        expect.objectContaining({ key: 'tenant/1 ü', limit: 4, slots: [expect.objectContaining({ task_id: id })] }),
      ]);
      const text = (await sluice(cli.as.reader, ['status', 'kq'])).stdout;
      expect(text).toMatch(/key +tenant\/1 ü +4 \(override\) +- +1/);
      expect(text).toContain(String((await cli.taskRow(id))!.lease_id));

      expect(await json(sluice(cli.as.admin, ['keys', 'clear', 'kq', 'tenant/1 ü', '--json']))).toEqual({
        queue: 'kq',
        key: 'tenant/1 ü',
        cleared: true,
      });
      expect(await cli.row('select 1 from sluice.key_limits where queue = $1', ['kq'])).toBeUndefined();
      expect((await sluice(cli.as.admin, ['keys', 'clear', 'kq', 'tenant/1 ü'])).code).toBe(1);
      expect((await sluice(cli.as.admin, ['keys', 'set', 'kq', '', '--limit', '2'])).code).toBe(2);
    });

    it('refuses keys and other path parts named "." or "..", which URLs read as folders, sending nothing', async () => {
      await json(sluice(cli.as.admin, ['queues', 'set', 'dotq', '--concurrency', '3', '--json']));
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
        const r = await sluice(cli.as.admin, args);
        expect(r.code, args.join(' ')).toBe(2);
        expect(r.stderr, args.join(' ')).toMatch(message);
      }
      expect(await cli.row('select options from sluice.queues where name = $1', ['dotq'])).toEqual({ options: { concurrency: 3 } });
      expect(await cli.row('select count(*)::int as n from sluice.key_limits where queue = $1', ['dotq'])).toEqual({ n: 0 });
    });

    it('lease release frees a held lease only with --force', async () => {
      const id = await enqueue(cli.as.writer, { queue: 'stuck', url: `${cli.endpoint.url}/keep`, lease_ms: 600_000, timeout_ms: 5_000 });
      const lease = await until(async () => (await cli.taskRow(id))?.lease_id as string | null, 'the lease');
      // Paused, so that the released task stays pending instead of being pushed again at once.
      await json(sluice(cli.as.admin, ['queues', 'pause', 'stuck', '--json']));

      const refused = await sluice(cli.as.admin, ['lease', 'release', 'stuck', lease]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/not released: .* Add --force/);
      expect(await cli.taskRow(id)).toMatchObject({ status: 'leased', lease_id: lease });

      const released = await json(sluice(cli.as.admin, ['lease', 'release', 'stuck', lease, '--force', '--json']));
      expect(released).toEqual({ released: true, task_id: id, lease_id: lease });
      expect(await cli.taskRow(id)).toMatchObject({ status: 'pending', lease_id: null, attempts: 0 });
      const task = await api<{ attempt_history: unknown[] }>(cli.as.reader, `/v1/tasks/${id}`);
      expect(task.attempt_history).toEqual([expect.objectContaining({ lease_id: lease, outcome: 'released' })]);
      expect((await sluice(cli.as.admin, ['lease', 'release', 'stuck', lease, '--force'])).code).toBe(1);
    });
  });
});
