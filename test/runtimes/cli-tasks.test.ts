/**
 * The `sluice` CLI against the Node server, continued (cli.test.ts has the rest): tasks (replay
 * and endpoints too), tail, a closed output, the runtimes that run the bin, and tail when Sluice
 * goes away.
 */
import { describe, expect, it } from 'vitest';
import { freePort } from '../../src/node/postgres.ts';
import { startNodeSluice } from '../../src/node/server.ts';
import {
  api,
  BIN_SLUICE,
  enqueue,
  expectDocumented,
  json,
  sluice,
  startTail,
  type Target,
  until,
  useNodeCli,
  withAdmin,
  within,
} from '../helpers/cli.ts';
import { testEnv } from '../helpers/config.ts';
import { startEndpoint } from '../helpers/endpoint.ts';
import { BIN } from '../helpers/process.ts';

describe('sluice against the Node server: tasks and tail', () => {
  const cli = useNodeCli();

  describe('tasks', () => {
    it('enqueue writes the task; get shows it; list filters by queue, status and key and pages', async () => {
      const made = await json<{ id: string; deduplicated: boolean }>(
        sluice(cli.as.writer, [
          'tasks',
          'enqueue',
          '--endpoint',
          `${cli.endpoint.url}/ok`,
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
      await expectDocumented('POST', `${cli.server.url}/v1/tasks`, made);
      expect(made.deduplicated).toBe(false);
      expect(await cli.taskRow(made.id)).toMatchObject({ status: 'pending', queue: 'tq', concurrency_key: 'a', body: '{"n":1}' });
      const again = await sluice(cli.as.writer, [
        'tasks',
        'enqueue',
        '--data',
        JSON.stringify({ url: `${cli.endpoint.url}/ok`, queue: 'tq', dedup_key: 'd1' }),
      ]);
      expect(again.stdout).toBe(`deduplicated: task ${made.id} (queue tq): pending\n`);
      const other = await enqueue(cli.as.writer, { queue: 'tq', url: `${cli.endpoint.url}/ok`, concurrency_key: 'b', delay_ms: 600_000 });

      const got = await json<{ id: string; body: unknown }>(sluice(cli.as.reader, ['tasks', 'get', made.id, '--json']));
      await expectDocumented('GET', `${cli.server.url}/v1/tasks/${made.id}`, got);
      expect(got).toMatchObject({ id: made.id, body: { n: 1 } });
      expect((await sluice(cli.as.reader, ['tasks', 'get', made.id])).stdout).toMatch(/body +application\/json: \{"n":1\}/);

      const byKey = await json<{ tasks: Array<{ id: string }> }>(
        sluice(cli.as.reader, ['tasks', 'list', '--queue', 'tq', '--key', 'b', '--json']),
      );
      await expectDocumented('GET', `${cli.server.url}/v1/tasks`, byKey);
      expect(byKey.tasks.map((x) => x.id)).toEqual([other]);
      const pending = await json<{ tasks: Array<{ id: string }> }>(
        sluice(cli.as.reader, ['tasks', 'list', '--queue', 'tq', '--status', 'pending', '--json']),
      );
      expect(pending.tasks.map((x) => x.id)).toEqual([other, made.id]);
      const first = await sluice(cli.as.reader, ['tasks', 'list', '--queue', 'tq', '--limit', '1']);
      expect(first.stdout).toMatch(new RegExp(`^ID +QUEUE +STATUS +KEY +ATTEMPTS[^\\n]*\\n${other} +tq +pending +b +0/5`));
      const cursor = /more: --cursor (\S+)/.exec(first.stderr)?.[1];
      const rest = await json<{ tasks: Array<{ id: string }> }>(
        sluice(cli.as.reader, ['tasks', 'list', '--queue', 'tq', '--cursor', cursor!, '--json']),
      );
      expect(rest.tasks.map((x) => x.id)).toEqual([made.id]);
      expect((await sluice(cli.as.reader, ['tasks', 'list', '--status', 'finished'])).code).toBe(1);
    });

    it('list --limit beyond one page of the API follows its cursor', async () => {
      const tasks = Array.from({ length: 620 }, (_, n) => ({
        queue: 'many',
        url: `${cli.endpoint.url}/ok`,
        delay_ms: 600_000,
        body: { n },
      }));
      await api(cli.as.writer, '/v1/tasks/batch', { method: 'POST', body: JSON.stringify({ tasks }) });
      const listed = await json<{ tasks: Array<{ id: string }>; next_cursor: string | null }>(
        sluice(cli.as.reader, ['tasks', 'list', '--queue', 'many', '--limit', '610', '--json']),
      );
      const ids = (
        await cli.t.db.query<{ id: string }>(`select id::text from sluice.all_tasks t where queue = 'many' order by t.id desc`)
      ).map((r) => r.id);
      expect(listed.tasks.map((x) => x.id)).toEqual(ids.slice(0, 610));
      expect(listed.next_cursor).not.toBeNull();
    });

    it('retry redrives a dead task, and cancel cancels a pending one', async () => {
      const id = await enqueue(cli.as.writer, { queue: 'rq', url: `${cli.endpoint.url}/fail-once`, max_attempts: 1 });
      await until(async () => (await cli.taskRow(id))?.status === 'dead', 'the task to die');
      const notDead = await sluice(cli.as.writer, ['tasks', 'cancel', id]);
      expect(notDead.code).toBe(1);
      expect(notDead.stderr).toMatch(/409 already_finished/);
      const retried = await json<{ status: string }>(sluice(cli.as.writer, ['tasks', 'retry', id, '--json']));
      expect(retried.status).toBe('pending');
      await until(async () => (await cli.taskRow(id))?.status === 'succeeded', 'the redriven task to succeed');

      const later = await enqueue(cli.as.writer, { queue: 'rq', url: `${cli.endpoint.url}/ok`, delay_ms: 600_000 });
      expect((await sluice(cli.as.writer, ['tasks', 'retry', later])).stderr).toMatch(/409 not_dead/);
      expect((await sluice(cli.as.writer, ['tasks', 'cancel', later])).stdout).toBe(`task ${later} (queue rq): cancelled\n`);
      expect(await cli.taskRow(later)).toMatchObject({ status: 'cancelled' });
    });

    it('replay counts the dead tasks that match with --dry-run, then redrives them; endpoints lists, pauses and resumes origins', async () => {
      const dead = (path: string) =>
        enqueue(cli.as.writer, { queue: 'replayq', url: `${cli.endpoint.url}/fail-once/${path}`, max_attempts: 1 });
      const ids = [await dead('a/1'), await dead('a/2'), await dead('b/1')];
      for (const id of ids) await until(async () => (await cli.taskRow(id))?.status === 'dead', 'the tasks to die');
      const prefix = ['--queue', 'replayq', '--url-prefix', `${cli.endpoint.url}/fail-once/a/`];
      expect((await sluice(cli.as.writer, ['tasks', 'replay', ...prefix, '--dry-run'])).stdout).toBe('2 dead tasks match\n');
      expect((await sluice(cli.as.writer, ['tasks', 'replay', '--since', 'yesterday'])).stderr).toMatch(/since/);
      const replayed = await json(sluice(cli.as.writer, ['tasks', 'replay', ...prefix, '--json']));
      expect(replayed).toEqual({ matched: 2, redriven: 2, skipped: 0, dry_run: false });
      for (const id of ids.slice(0, 2)) await until(async () => (await cli.taskRow(id))?.status === 'succeeded', 'the replayed tasks');
      expect(await cli.taskRow(ids[2]!)).toMatchObject({ status: 'dead' });

      // The endpoint's origin, its first pushes' failures counted; a pause by hand needs admin.
      const origin = new URL(cli.endpoint.url).origin;
      const listed = await json<{ endpoints: Array<{ origin: string; failures_5m: number }> }>(
        sluice(cli.as.reader, ['endpoints', '--json']),
      );
      await expectDocumented('GET', `${cli.server.url}/v1/endpoints`, listed);
      expect(listed.endpoints.find((e) => e.origin === origin)?.failures_5m).toBeGreaterThanOrEqual(3);
      expect((await sluice(cli.as.reader, ['endpoints'])).stdout).toMatch(new RegExp(`^ORIGIN .*\\n${origin} +healthy `));
      const refused = await sluice(cli.as.writer, ['endpoints', 'pause', origin]);
      expect([refused.code, refused.stderr]).toEqual([1, expect.stringMatching(/403/)]);
      expect((await sluice(cli.as.admin, ['endpoints', 'pause', origin])).stdout).toBe(`${origin}: paused (by hand)\n`);
      expect(await cli.row('select paused_by from sluice.endpoints where origin = $1', [origin])).toEqual({ paused_by: 'hand' });
      expect((await sluice(cli.as.admin, ['endpoints', 'resume', origin])).stdout).toBe(`${origin}: healthy\n`);
      expect(await cli.row('select paused_by from sluice.endpoints where origin = $1', [origin])).toEqual({ paused_by: null });
    });
  });

  describe('tail', () => {
    it('prints a new task and its finish, as JSON lines, and ends with 0 on Ctrl-C', async () => {
      const before = await enqueue(cli.as.writer, { queue: 'tailq', url: `${cli.endpoint.url}/ok` });
      await until(async () => (await cli.taskRow(before))?.status === 'succeeded', 'the first task');
      const tail = startTail(cli.as.reader, ['--queue', 'tailq', '--interval', '100', '--lines', '1', '--json']);
      await tail.waitFor((l) => JSON.parse(l).event === 'recent', 'the recent task');
      const id = await enqueue(cli.as.writer, { queue: 'tailq', url: `${cli.endpoint.url}/fail-once`, backoff: { initial_ms: 300 } });
      await tail.waitFor((l) => JSON.parse(l).event === 'finished' && JSON.parse(l).task.id === id, 'the finish');
      expect(await tail.interrupt()).toBe(0);
      const events = tail.lines().map((l) => JSON.parse(l) as { event: string; task: { id: string; status: string } });
      expect(events[0]).toMatchObject({ event: 'recent', task: { id: before, status: 'succeeded' } });
      expect(events.filter((e) => e.task.id === id).map((e) => e.event)).toEqual(expect.arrayContaining(['new', 'finished']));
      expect(events.at(-1)).toMatchObject({ event: 'finished', task: { id, status: 'succeeded' } });
      expect(await cli.taskRow(id)).toMatchObject({ status: 'succeeded', attempts: 2 });
      expect(tail.stderr()).toBe('');
    });

    it('reports a task whose enqueue commits after a newer task was seen, once', async () => {
      // Two tasks before tail starts: the older one is neither shown (--lines 1) nor, later, new.
      await enqueue(cli.as.writer, { queue: 'lateq', url: `${cli.endpoint.url}/ok`, delay_ms: 600_000 });
      const before = await enqueue(cli.as.writer, { queue: 'lateq', url: `${cli.endpoint.url}/ok`, delay_ms: 600_000 });
      const tail = startTail(cli.as.reader, ['--queue', 'lateq', '--interval', '100', '--lines', '1', '--json']);
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
      const transaction = cli.t.db.transaction(async (tx) => {
        const [inserted] = await tx.query<{ id: string }>(
          `insert into sluice.tasks (queue, url, concurrency_key, max_attempts, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, timeout_ms, lease_ms, run_at)
           values ('lateq', 'https://example.com', 'slow', 1, 1000, 1000, 2, 0, 1000, 2000, now() + interval '1 hour') returning id::text`,
        );
        took(inserted!.id);
        await held;
      });
      try {
        const late = await lateId;
        const newer = await enqueue(cli.as.writer, { queue: 'lateq', url: `${cli.endpoint.url}/ok`, delay_ms: 600_000 });
        expect(BigInt(newer)).toBeGreaterThan(BigInt(late));
        await tail.waitFor((l) => JSON.parse(l).task.id === newer, 'the newer task');
        commit();
        await transaction;
        await tail.waitFor((l) => JSON.parse(l).task.id === late, 'the task committed late');
        // A later poll, which re-reads both within its look-back, reports neither again.
        const last = await enqueue(cli.as.writer, { queue: 'lateq', url: `${cli.endpoint.url}/ok`, delay_ms: 600_000 });
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
        const answer = await fetch(`${cli.server.url}${request.path}`, { headers: { authorization: `${request.headers.authorization}` } });
        const body = await answer.text();
        if (request.path.startsWith('/v1/tasks?')) listings++;
        return { status: answer.status, headers: { 'content-type': 'application/json' }, body };
      });
      try {
        const target: Target = { url: relay.url, env: { SLUICE_URL: relay.url, SLUICE_API_KEY: cli.secrets.readKey } };
        const tail = startTail(target, ['--queue', 'emptyq', '--interval', '100', '--lines', '0', '--json']);
        await until(async () => listings >= 1, 'the first poll');
        // Three tasks that finished before any poll saw them, committed together.
        const ids = (
          await cli.t.db.query<{ id: string }>(
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
        const before = await enqueue(cli.as.writer, { queue, url: `${cli.endpoint.url}/ok`, delay_ms: 600_000 });
        const tail = startTail(cli.as.reader, ['--queue', queue, '--interval', '100', '--lines', '1'], { command });
        await tail.waitFor((l) => l.includes(` ${before} `), 'the task before');
        tail.closeOutput();
        await enqueue(cli.as.writer, { queue, url: `${cli.endpoint.url}/ok`, delay_ms: 600_000 });
        expect(await within(tail.exited, 10_000, 'tail to end'), command.join(' ')).toBe(0);
        expect(tail.stderr()).toBe('');
      }
    });
  });

  describe('runtimes', () => {
    it('runs under a Node that cannot strip types (through the project Node), Bun, Deno and npx', async () => {
      const id = await enqueue(cli.as.writer, { queue: 'rt', url: `${cli.endpoint.url}/ok`, delay_ms: 600_000 });
      const commands = [
        [`${BIN}/node`, '--no-experimental-strip-types', 'src/cli/sluice.mjs'],
        [`${BIN}/bun`, 'src/cli/sluice.mjs'],
        [`${BIN}/deno`, 'run', '-A', 'src/cli/sluice.mjs'],
        ['npx', '--no', 'sluice'],
      ];
      for (const command of commands) {
        const got = await json<{ id: string }>(sluice(cli.as.reader, ['tasks', 'get', id, '--json'], { command }));
        expect(got.id, command.join(' ')).toBe(id);
      }
    });

    it('passes Ctrl-C on to the project Node it re-runs under', async () => {
      await enqueue(cli.as.writer, { queue: 'rt2', url: `${cli.endpoint.url}/ok`, delay_ms: 600_000 });
      const command = [`${BIN}/node`, '--no-experimental-strip-types', 'src/cli/sluice.mjs'];
      const tail = startTail(cli.as.reader, ['--queue', 'rt2', '--lines', '1'], { command });
      await tail.waitFor((l) => /\brecent\b/.test(l), 'the queued task');
      // SIGINT to the shim alone (a terminal would send it to both).
      expect(await tail.interrupt()).toBe(0);
    });
  });

  describe('tail when Sluice goes away', () => {
    it('says so on stderr, keeps polling, and goes on once Sluice answers again', async () => {
      const port = await freePort();
      const env = testEnv(cli.secrets, cli.t.url, { SLUICE_API_KEYS: withAdmin(cli.secrets) });
      let api = await startNodeSluice({ env, port, dispatch: false });
      const target: Target = { url: api.url, env: { SLUICE_URL: api.url, SLUICE_API_KEY: cli.secrets.apiKey } };
      const before = await enqueue(target, { queue: 'away', url: `${cli.endpoint.url}/ok`, delay_ms: 600_000 });
      const tail = startTail(target, ['--queue', 'away', '--interval', '100', '--lines', '1']);
      await tail.waitFor((l) => new RegExp(`recent +${before} `).test(l), 'the task before');
      await api.close();
      await until(async () => tail.stderr().includes('cannot reach Sluice'), 'a warning on stderr');
      expect(tail.stderr()).toMatch(/^sluice: cannot reach Sluice at .* \(tail goes on trying\)\n/);
      api = await startNodeSluice({ env, port, dispatch: false });
      try {
        const after = await enqueue(target, { queue: 'away', url: `${cli.endpoint.url}/ok`, delay_ms: 600_000 });
        await tail.waitFor((l) => new RegExp(`new +${after} `).test(l), 'the task after');
        expect(await tail.interrupt()).toBe(0);
      } finally {
        await api.close();
      }
    });
  });
});
