/**
 * `node bench/keyed-gaps.ts [--runs 50] [--tasks 2000] [--gap-s 6]`: keyed drains with idle gaps
 * between them, as `npm run bench` has them (the peers run in the harness's process between
 * Sluice's runs, so the endpoint's event loop is busy while Sluice's server idles). Each run: a
 * queue with `key_concurrency` 1, `--tasks` tasks over 100 keys enqueued through the API in
 * batches of 500 while the queue runs, drained to the endpoint in this process. Between runs
 * this process is kept busy for the gap (the endpoint can act on nothing, its idle connections'
 * timeouts included). Prints every run's rate, the median, and the runs below half of it, with
 * what the server logged about unanswered pushes.
 */
import { type ChildProcess, execFileSync } from 'node:child_process';
import { symlinkSync } from 'node:fs';
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
    runs: { type: 'string', default: '50' },
    tasks: { type: 'string', default: '2000' },
    'gap-s': { type: 'string', default: '6' },
    // Another version's server (a commit), checked out beside this one: to see a fix make a difference.
    from: { type: 'string' },
  },
});
const runs = Number(values.runs);
const tasks = Number(values.tasks);
const gapMs = Number(values['gap-s']) * 1000;
const KEYS = 100;

let serveRoot = ROOT;
if (values.from) {
  serveRoot = await mkdtemp(join(tmpdir(), 'sluice-from-'));
  execFileSync('git', ['worktree', 'add', '--detach', serveRoot, values.from], { cwd: ROOT, stdio: 'ignore' });
  symlinkSync(join(ROOT, 'node_modules'), join(serveRoot, 'node_modules'));
}

const dir = await mkdtemp(join(tmpdir(), 'sluice-gaps-'));
const postgres = await startEmbeddedPostgres({ dir, persistent: false, settings: { fsync: 'off' } });
const admin = new pg.Pool({ connectionString: postgres.url('postgres'), max: 1 });
admin.on('error', () => {});
await admin.query('create database gaps');
const url = postgres.url('gaps');
await migrateDatabase(url);

let done = 0;
let onDone: () => void = () => {};
const endpoint = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200).end();
    done++;
    onDone();
  });
});
await new Promise<void>((r) => endpoint.listen(0, '127.0.0.1', r));
const target = `http://127.0.0.1:${(endpoint.address() as { port: number }).port}/noop`;

const key = await generateApiKey('gaps');
const port = await freePort();
const server: ChildProcess = await spawnReady(
  `${BIN}/node`,
  [join(serveRoot, 'src/node/serve.ts')],
  {
    DATABASE_URL: url,
    SLUICE_API_KEYS: JSON.stringify([key.entry]),
    SLUICE_SIGNING_KEYS: JSON.stringify({ keys: [await generateSigningJwk('EdDSA', 'gaps-1')] }),
    SLUICE_ALLOW_PRIVATE_TARGETS: 'true',
    SLUICE_DISPATCH_PARALLELISM: '64',
    PORT: String(port),
  },
  'sluice: listening on',
);
let unanswered = 0;
server.stderr?.on('data', (chunk: Buffer) => {
  unanswered += (chunk.toString().match(/went unanswered/g) ?? []).length;
});
const base = `http://127.0.0.1:${port}`;
const call = async (method: string, path: string, body: unknown): Promise<void> => {
  const send = () =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  // After a busy gap, this process's own kept-alive connection to the API may have been closed
  // by the server meanwhile: the same race as the pushes', on the client's side; send again.
  const res = await send().catch(send);
  await res.arrayBuffer();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status}`);
};
await call('PUT', '/v1/queues/keyed', { key_concurrency: 1 });

const rates: number[] = [];
for (let run = 1; run <= runs; run++) {
  done = 0;
  const finished = new Promise<void>((resolve) => {
    onDone = () => {
      if (done >= tasks) resolve();
    };
  });
  const started = performance.now();
  for (let i = 0; i < tasks; i += 500) {
    const batch = Array.from({ length: Math.min(500, tasks - i) }, (_, j) => ({
      url: target,
      queue: 'keyed',
      concurrency_key: `k${(i + j) % KEYS}`,
      body: { i: i + j },
    }));
    await call('POST', '/v1/tasks/batch', { tasks: batch });
  }
  await finished;
  const rate = tasks / ((performance.now() - started) / 1000);
  rates.push(rate);
  console.log(`run ${run}: ${Math.round(rate)} tasks/s${unanswered > 0 ? ` (unanswered so far: ${unanswered})` : ''}`);
  // The gap: this process busy, as while the peers run in it; the server idles.
  const until = performance.now() + gapMs;
  while (performance.now() < until) {
    /* busy */
  }
}

const sorted = [...rates].sort((a, b) => a - b);
const median = sorted[Math.floor(sorted.length / 2)]!;
const slow = rates.map((r, i) => [i + 1, r] as const).filter(([, r]) => r < median / 2);
console.log(
  `\n${runs} keyed runs of ${tasks} tasks, ${gapMs / 1000} s busy gaps: median ${Math.round(median)} tasks/s, min ${Math.round(sorted[0]!)}, max ${Math.round(sorted[sorted.length - 1]!)}; below half the median: ${slow.length}${slow.length > 0 ? ` (runs ${slow.map(([i]) => i).join(', ')})` : ''}; pushes the server logged as unanswered: ${unanswered}`,
);

const exited = new Promise((r) => server.once('exit', r));
server.kill('SIGTERM');
await exited;
await new Promise<void>((r) => endpoint.close(() => r()));
await admin.end();
await postgres.stop();
await rm(dir, { recursive: true, force: true });
if (values.from) execFileSync('git', ['worktree', 'remove', '--force', serveRoot], { cwd: ROOT, stdio: 'ignore' });
process.exit(slow.length === 0 ? 0 : 1);
