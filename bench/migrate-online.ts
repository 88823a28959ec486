/**
 * `node bench/migrate-online.ts [--finished N] [--from REV]`: does upgrading stop dispatch? A
 * database of the previous layout (REV, default the commit before 0014_history.sql) holds N
 * finished tasks (default 1,000,000) with an attempt each; the previous version's `serve` pushes
 * a steady stream (200 tasks/s); then the current migrations run against the live database, and,
 * as an operator would, the old server is replaced by the current one. Prints how long the
 * migration took, the longest gap between pushes while it ran, the gap over the switch, and
 * what was late or lost.
 */
import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { existsSync, symlinkSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { migrateDatabase } from '../src/node/migrations.ts';
import { freePort, startEmbeddedPostgres } from '../src/node/postgres.ts';
import { generateApiKey } from '../src/security/api-keys.ts';
import { generateSigningJwk } from '../src/security/keyring.ts';
import { BIN, ROOT, spawnReady } from '../test/helpers/process.ts';

const { values } = parseArgs({
  options: {
    finished: { type: 'string', default: '1000000' },
    from: { type: 'string', default: '' },
    rate: { type: 'string', default: '200' },
  },
});
const finished = Number(values.finished);
const rate = Number(values.rate);
const from =
  values.from ||
  `${execFileSync('git', ['log', '-1', '--format=%H', '--diff-filter=A', '--', 'migrations/0014_history.sql'], {
    cwd: ROOT,
    encoding: 'utf8',
  }).trim()}^`;

// The previous version, checked out beside this one (its dependencies are this one's).
const prev = await mkdtemp(join(tmpdir(), 'sluice-prev-'));
execFileSync('git', ['worktree', 'add', '--detach', prev, from], { cwd: ROOT, stdio: 'ignore' });
if (!existsSync(join(prev, 'node_modules'))) symlinkSync(join(ROOT, 'node_modules'), join(prev, 'node_modules'));
const say = (line: string) => console.log(line);
say(`previous version: ${execFileSync('git', ['log', '-1', '--format=%h %s', from], { cwd: ROOT, encoding: 'utf8' }).trim()}`);

const dir = await mkdtemp(join(tmpdir(), 'sluice-migrate-'));
const postgres = await startEmbeddedPostgres({ dir, persistent: false });
const admin = new pg.Pool({ connectionString: postgres.url('postgres'), max: 1 });
await admin.query('create database upgrade');
const url = postgres.url('upgrade');
const db = new pg.Pool({ connectionString: url, max: 2 });
const { migrateDatabase: migratePrevious } = (await import(join(prev, 'src/node/migrations.ts'))) as {
  migrateDatabase: typeof migrateDatabase;
};
await migratePrevious(url);

const t = performance.now();
await db.query(
  `insert into sluice.tasks (queue, status, url, body, max_attempts, attempts, backoff, timeout_ms, lease_ms,
     created_at, updated_at, finished_at, last_status, last_lease_id)
   select 'history', 'succeeded', 'http://127.0.0.1:1/noop', '{"n":1}', 5, 1,
     '{"initial_ms":1000,"max_ms":3600000,"factor":2,"jitter":0.25}', 30000, 60000,
     now() - interval '2 hours', now() - interval '1 hour', now() - interval '1 hour', 200, gen_random_uuid()
   from generate_series(1, $1::int)`,
  [finished],
);
await db.query(
  `insert into sluice.attempts (task_id, attempt, lease_id, started_at, ended_at, outcome, http_status, duration_ms)
   select id, 1, last_lease_id, finished_at - interval '10 ms', finished_at, 'succeeded', 200, 10 from sluice.tasks`,
);
await db.query('vacuum analyze');
say(`${finished.toLocaleString('en-US')} finished tasks with their attempts written in ${((performance.now() - t) / 1000).toFixed(1)} s`);

// The endpoint: when each push arrived, and which task it was.
const arrivals: Array<{ at: number; n: number }> = [];
const endpoint = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    arrivals.push({ at: performance.now(), n: (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { n: number }).n });
    res.writeHead(200).end();
  });
});
await new Promise<void>((r) => endpoint.listen(0, '127.0.0.1', r));
const target = `http://127.0.0.1:${(endpoint.address() as { port: number }).port}/noop`;

const key = await generateApiKey('upgrade');
const env = {
  DATABASE_URL: url,
  SLUICE_API_KEYS: JSON.stringify([key.entry]),
  SLUICE_SIGNING_KEYS: JSON.stringify({ keys: [await generateSigningJwk('EdDSA', 'upgrade-1')] }),
  SLUICE_ALLOW_PRIVATE_TARGETS: 'true',
};
async function serve(root: string): Promise<{ base: string; stop(): Promise<void> }> {
  const port = await freePort();
  const child: ChildProcess = await spawnReady(
    `${BIN}/node`,
    [join(root, 'src/node/serve.ts')],
    { ...env, PORT: String(port) },
    'sluice: listening on',
  );
  return {
    base: `http://127.0.0.1:${port}`,
    async stop() {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

let server = await serve(prev);
// The producer: 20 tasks every 20/rate s, to whichever server is up.
const enqueuedAt = new Map<number, number>();
let next = 0;
let failedBatches = 0;
/** What the refused or failed batches were answered, and how many each. */
const failures = new Map<string, number>();
let producing = true;
const producer = (async () => {
  const started = performance.now();
  for (let k = 0; producing; k++) {
    const wait = started + (k * 20 * 1000) / rate - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const first = next;
    next += 20;
    const tasks = Array.from({ length: 20 }, (_, i) => ({ url: target, queue: 'live', body: { n: first + i } }));
    try {
      const res = await fetch(`${server.base}/v1/tasks/batch`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ tasks }),
        signal: AbortSignal.timeout(10_000),
      });
      const text = await res.text();
      if (res.status !== 201) throw new Error(`${res.status} ${text.slice(0, 120)}`);
      const at = performance.now();
      for (let i = 0; i < 20; i++) enqueuedAt.set(first + i, at);
    } catch (error) {
      failedBatches++;
      failures.set((error as Error).message, (failures.get((error as Error).message) ?? 0) + 1);
    }
  }
})();

await new Promise((r) => setTimeout(r, 10_000));
const migrationStart = performance.now();
const applied = await migrateDatabase(url);
const migrationEnd = performance.now();
say(`migration (${applied.join(', ')}) took ${((migrationEnd - migrationStart) / 1000).toFixed(1)} s against the live database`);
// The operator replaces the server at once.
await server.stop();
server = await serve(ROOT);
const switched = performance.now();
await new Promise((r) => setTimeout(r, 10_000));
producing = false;
await producer;
// Pushes of tasks the old server claimed after the migration but could not push come once their lease ends.
const enqueued = enqueuedAt.size;
const until = performance.now() + 90_000;
while (new Set(arrivals.map((a) => a.n)).size < enqueued && performance.now() < until) await new Promise((r) => setTimeout(r, 250));
await server.stop();

function longestGap(a: number, b: number): number {
  const times = arrivals.map((x) => x.at).filter((x) => x >= a && x <= b);
  let gap = 0;
  for (let i = 1; i < times.length; i++) gap = Math.max(gap, times[i]! - times[i - 1]!);
  if (times.length > 0) gap = Math.max(gap, times[0]! - a, b - times[times.length - 1]!);
  return times.length === 0 ? b - a : gap;
}
const firstNew = arrivals.find((x) => x.at >= switched)?.at ?? Number.NaN;
const pushedOnce = new Set(arrivals.map((a) => a.n));
const late = [...enqueuedAt].filter(([n, at]) => {
  const arrival = arrivals.find((x) => x.n === n)?.at;
  return arrival !== undefined && arrival - at > 5_000;
}).length;
const [counts] = (
  await db.query<{ hot: number; history: number }>(
    'select (select count(*) from sluice.tasks)::int as hot, (select count(*) from sluice.finished)::int as history',
  )
).rows;
if (failures.size > 0) say(`batches refused or failed: ${[...failures].map(([why, n]) => `${n} × ${why}`).join('; ')}`);
say(`longest gap between pushes while the migration ran: ${Math.round(longestGap(migrationStart, migrationEnd))} ms`);
say(
  `from the migration's end to the first push by the new server: ${Math.round(firstNew - migrationEnd)} ms (old server stopped, new one up after ${Math.round(switched - migrationEnd)} ms)`,
);
say(
  `tasks enqueued ${enqueued} (${failedBatches} batches refused or failed, resent by nobody), pushed ${pushedOnce.size}, more than 5 s after enqueue: ${late}; hot table ${counts!.hot} rows, history ${counts!.history.toLocaleString('en-US')}`,
);

await new Promise<void>((r) => endpoint.close(() => r()));
await db.end();
await admin.end();
await postgres.stop();
await rm(dir, { recursive: true, force: true });
execFileSync('git', ['worktree', 'remove', '--force', prev], { cwd: ROOT, stdio: 'ignore' });
