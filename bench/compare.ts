/**
 * `npm run bench`: Sluice side by side with graphile-worker and pg-boss on one embedded Postgres
 * (docs: /work/shared/research/performance.md §5), every contender at 16 and at 64 in flight.
 * Workloads, chosen with `--only` (repeatable):
 *   engine   Sluice's claim/settle SQL in-process (no-op push) beside the peers' drains
 *   push     Sluice whole (`serve`, HTTP enqueue, signed pushes) beside the same drains, and
 *            beside its ceiling: a bare loop of the same signed POSTs, no queue, no database
 *   keyed    N jobs over 100 keys, one running per key (engine and push, graphile-worker
 *            named queues, pg-boss key_strict_fifo): throughput, overlaps, FIFO
 *   latency  idle worker (the peers at 16), single enqueues 50 ms apart, enqueue → handler start
 * Options: --tasks N (20000), --iterations n (3, after one smaller warm-up), --finished n (Sluice's
 * table pre-filled with n succeeded tasks). Writes bench/results/<time>.json and .md.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { DEFAULT_PARALLELISM } from '../src/config.ts';
import { barePush } from './compare/bare-push.ts';
import { PG_SETTINGS, startCluster } from './compare/cluster.ts';
import { type Contender, IN_FLIGHT, IN_FLIGHT_LEVELS, makeJobs } from './compare/contender.ts';
import { graphile } from './compare/graphile.ts';
import { pgBossTuned } from './compare/pgboss.ts';
import { type Machine, markdown, type Results } from './compare/report.ts';
import { sluiceSecrets } from './compare/sluice-common.ts';
import { sluiceEngine } from './compare/sluice-engine.ts';
import { sluicePush, startEndpoint } from './compare/sluice-push.ts';
import { type DrainRun, drain, latency } from './compare/workloads.ts';

const WORKLOADS = ['engine', 'push', 'keyed', 'latency'] as const;
const KEYS = 100;
const LATENCY = { samples: 200, gapMs: 50, warmup: 10 };
/** A drain still running after this is stopped and reported as partial (a stalled keyed run). */
const DRAIN_LIMIT_MS = 45_000;

const { values } = parseArgs({
  options: {
    tasks: { type: 'string', default: '20000' },
    iterations: { type: 'string', default: '3' },
    finished: { type: 'string', default: '0' },
    only: { type: 'string', multiple: true },
  },
});
const tasks = Number(values.tasks);
const iterations = Number(values.iterations);
const finished = Number(values.finished);
const only = (values.only ?? [...WORKLOADS]).flatMap((w) => w.split(','));
for (const w of only) {
  if (!(WORKLOADS as readonly string[]).includes(w)) throw new Error(`--only ${w}: not one of ${WORKLOADS.join(', ')}`);
}
if (![tasks, iterations, finished].every((x) => Number.isInteger(x) && x >= 0) || tasks < 1) {
  throw new Error('--tasks, --iterations and --finished take whole numbers (tasks at least 1)');
}
const warmupTasks = Math.min(tasks, 5_000);

const began = performance.now();
const startedAt = new Date().toISOString();
const cluster = await startCluster();
const endpoint = await startEndpoint();
const secrets = await sluiceSecrets();
// Every contender at the peers' usual 16 in flight and at Sluice's Node default of 64 (a push in
// flight is a socket, not a worker: see docs/performance.md), so that each Sluice figure stands
// beside the peers' at the same level.
const [low, high] = IN_FLIGHT_LEVELS;
const [graphileDefault16, graphileDefault64] = [graphile(false, low), graphile(false, high)];
const [graphileBatched16, graphileBatched64] = [graphile(true, low), graphile(true, high)];
const [pgBoss16, pgBoss64] = [pgBossTuned(low), pgBossTuned(high)];
// The ceiling for push: the same signed POSTs to the same endpoint, with no queue behind them.
const [bare16, bare64] = [barePush(endpoint, low), barePush(endpoint, high)];
const engine16 = sluiceEngine(secrets, IN_FLIGHT);
const engine = sluiceEngine(secrets, DEFAULT_PARALLELISM.node);
const push16 = sluicePush(secrets, endpoint, IN_FLIGHT);
const push = sluicePush(secrets, endpoint, null);
const peers16 = [graphileDefault16, graphileBatched16, pgBoss16];
const peers64 = [graphileDefault64, graphileBatched64, pgBoss64];
const all = [...peers16, bare16, engine16, push16, ...peers64, bare64, engine, push];

const results: Results = {
  startedAt,
  wallSeconds: 0,
  command: `node bench/compare.ts ${process.argv.slice(2).join(' ')}`.trim(),
  machine: machine(cluster.version),
  postgresSettings: { ...PG_SETTINGS },
  options: { tasks, iterations, warmupTasks, finished, workloads: only, keys: KEYS, drainLimitSeconds: DRAIN_LIMIT_MS / 1000 },
  contenders: all.map(({ id, kind, inFlight, label, config, role }) => ({ id, kind, inFlight, label, config, role })),
  drain: {},
  keyed: {},
  latency: {},
};

const log = (line: string) => console.error(`[bench ${Math.round((performance.now() - began) / 1000)}s] ${line}`);

/** Iteration 0 is the warm-up (dropped); then every contender once per iteration, in turn. */
async function interleaved(contenders: readonly Contender[], keyed: boolean, into: Record<string, DrainRun[]>): Promise<void> {
  for (let iteration = 0; iteration <= iterations; iteration++) {
    const jobs = makeJobs(iteration === 0 ? warmupTasks : tasks, keyed ? KEYS : null);
    for (const c of contenders) {
      const run = await drain(cluster, c, jobs, { keyed, finished, limitMs: DRAIN_LIMIT_MS });
      const rate = Math.round(run.jobs / (run.drainMs / 1000));
      log(
        `${keyed ? 'keyed' : 'drain'} ${iteration === 0 ? 'warm-up' : `#${iteration}`} ${c.id}: ${rate} jobs/s${run.partial ? ` (partial: ${run.jobs} done at the limit)` : ''}, enqueue ${Math.round(run.enqueueMs)} ms${keyed ? `, overlaps ${run.overlaps}, FIFO violations ${run.fifoViolations}` : ''}`,
      );
      if (iteration > 0) into[c.id] = [...(into[c.id] ?? []), run];
    }
  }
}

try {
  const engines = only.includes('engine') ? [engine16, engine] : [];
  const pushes = only.includes('push') ? [bare16, push16, bare64, push] : [];
  if (engines.length + pushes.length > 0) await interleaved([...peers16, ...peers64, ...engines, ...pushes], false, results.drain);
  if (only.includes('keyed')) {
    await interleaved([graphileDefault16, pgBoss16, engine16, push16, graphileDefault64, pgBoss64, engine, push], true, results.keyed);
  }
  if (only.includes('latency')) {
    for (const c of [...peers16, push]) {
      results.latency[c.id] = await latency(cluster, c, LATENCY.samples, LATENCY.gapMs, LATENCY.warmup);
      log(`latency ${c.id}: done`);
    }
  }
} finally {
  await endpoint.close();
  await cluster.stop();
}

results.wallSeconds = (performance.now() - began) / 1000;
const md = markdown(results);
const dir = new URL('./results/', import.meta.url);
await mkdir(dir, { recursive: true });
const stem = startedAt.replace(/[:.]/g, '-');
await writeFile(new URL(`${stem}.json`, dir), `${JSON.stringify(results, null, 2)}\n`);
await writeFile(new URL(`${stem}.md`, dir), md);
console.log(md);
log(`written to bench/results/${stem}.json and .md`);

function machine(postgres: string): Machine {
  const cpu = /model name\s*:\s*(.+)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? 'unknown';
  const version = (name: string) =>
    (JSON.parse(readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url), 'utf8')) as { version: string }).version;
  const git = (...args: string[]) => execFileSync('git', args, { encoding: 'utf8', cwd: new URL('..', import.meta.url) }).trim();
  const dirty = git('status', '--porcelain', '--', 'src', 'migrations') === '' ? '' : ' (src or migrations modified)';
  return {
    nproc: availableParallelism(),
    cpu,
    node: process.versions.node,
    postgres,
    peers: { 'graphile-worker': version('graphile-worker'), 'pg-boss': version('pg-boss') },
    sluiceCommit: `${git('rev-parse', '--short', 'HEAD')}${dirty}`,
  };
}
