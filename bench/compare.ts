/**
 * `npm run bench`: Sluice side by side with graphile-worker and pg-boss on one embedded Postgres
 * (docs: /work/shared/research/performance.md §5). Workloads, chosen with `--only` (repeatable):
 *   engine   Sluice's claim/settle SQL in-process (no-op push) beside the peers' drains
 *   push     Sluice whole (`serve`, HTTP enqueue, signed pushes) beside the same drains
 *   keyed    N jobs over 100 keys, one running per key (engine and push, graphile-worker
 *            named queues, pg-boss key_strict_fifo): throughput, overlaps, FIFO
 *   latency  idle worker, single enqueues 50 ms apart, enqueue → handler start
 * Options: --tasks N (20000), --iterations n (3, after one smaller warm-up), --finished n (Sluice's
 * table pre-filled with n succeeded tasks). Writes bench/results/<time>.json and .md.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { NODE_PARALLELISM as SLUICE_NODE_PARALLELISM } from '../src/node/server.ts';
import { PG_SETTINGS, startCluster } from './compare/cluster.ts';
import { type Contender, IN_FLIGHT, makeJobs } from './compare/contender.ts';
import { graphileBatched, graphileDefault } from './compare/graphile.ts';
import { pgBossTuned } from './compare/pgboss.ts';
import { type Machine, markdown, type Results } from './compare/report.ts';
import { sluiceSecrets } from './compare/sluice-common.ts';
import { sluiceEngine } from './compare/sluice-engine.ts';
import { sluicePush, startEndpoint } from './compare/sluice-push.ts';
import { type DrainRun, drain, latency } from './compare/workloads.ts';

const WORKLOADS = ['engine', 'push', 'keyed', 'latency'] as const;
const KEYS = 100;
const LATENCY = { samples: 200, gapMs: 50, warmup: 10 };
/** A drain still running after this is stopped and reported as partial (pg-boss's keyed run). */
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
// Sluice at the peers' 16 in flight, and at its Node default (a push in flight is a socket,
// not a worker: see README, Performance).
const engine16 = sluiceEngine(secrets, IN_FLIGHT);
const engine = sluiceEngine(secrets, SLUICE_NODE_PARALLELISM);
const push16 = sluicePush(secrets, endpoint, IN_FLIGHT);
const push = sluicePush(secrets, endpoint, null);
const peers = [graphileDefault, graphileBatched, pgBossTuned];
const all = [...peers, engine16, engine, push16, push];

const results: Results = {
  startedAt,
  wallSeconds: 0,
  command: `node bench/compare.ts ${process.argv.slice(2).join(' ')}`.trim(),
  machine: machine(cluster.version),
  postgresSettings: { ...PG_SETTINGS },
  options: { tasks, iterations, warmupTasks, finished, workloads: only, keys: KEYS, drainLimitSeconds: DRAIN_LIMIT_MS / 1000 },
  contenders: all.map(({ id, label, config }) => ({ id, label, config })),
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
  const sluiceDrains = [...(only.includes('engine') ? [engine16, engine] : []), ...(only.includes('push') ? [push16, push] : [])];
  if (sluiceDrains.length > 0) await interleaved([...peers, ...sluiceDrains], false, results.drain);
  if (only.includes('keyed')) await interleaved([graphileDefault, pgBossTuned, engine16, engine, push16, push], true, results.keyed);
  if (only.includes('latency')) {
    for (const c of [graphileDefault, graphileBatched, pgBossTuned, push]) {
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
