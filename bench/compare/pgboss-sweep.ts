/**
 * `npx node bench/compare/pgboss-sweep.ts [--tasks 20000] [--limit 12] [--repeat 1] [--only keyed,drain]
 * [--in-flight 16,64] [--batch 1,5,10,50,100]`: pg-boss over the work() settings its docs allow, to
 * find its best for bench/compare.ts (pgboss.ts TUNED). Here rather than beside compare.ts because
 * only bench/tsconfig.json has pg-boss's types.
 *
 * keyed  N jobs over 100 keys, one running per key: `key_strict_fifo` (singletonKey = key) at each
 *        localConcurrency (--in-flight) × batchSize (--batch) × the wait after a short fetch at its
 *        0.5 s floor with no burst, with burstWhenBatchFull, with burstWhenReadyExceeds 1 (its stats
 *        refreshed every second, their floor), and burstWhenBatchFull with NOTIFY's 30 s default
 *        backstop instead (a short fetch then waits for an insert's notification or 30 s). Beside
 *        them: the settings bench/compare.ts had (that backstop, 500 jobs a call), polling without
 *        NOTIFY, and pg-boss's other per-key limit, groups (groupConcurrency, localGroupConcurrency 1).
 * drain  N jobs on a standard queue: each localConcurrency × batchSize 20, 50, 100, 200,
 *        burstWhenBatchFull, backstop at the floor.
 *
 * `--repeat` runs per setting (median, min–max), each on a fresh database, after one warm-up run;
 * a run still going after `--limit` seconds is stopped and its rate is of the part done (†).
 * Prints Markdown and writes it to bench/results/pgboss-sweep-<time>.md.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { startCluster } from './cluster.ts';
import { IN_FLIGHT, IN_FLIGHT_LEVELS, makeJobs } from './contender.ts';
import { describeWork, type PgBossTuning, POLL_FLOOR, pgBoss } from './pgboss.ts';
import { spread } from './report.ts';
import { type DrainRun, drain } from './workloads.ts';

const KEYS = 100;

const { values } = parseArgs({
  options: {
    tasks: { type: 'string', default: '20000' },
    limit: { type: 'string', default: '12' },
    repeat: { type: 'string', default: '1' },
    only: { type: 'string', default: 'keyed,drain' },
    'in-flight': { type: 'string', default: IN_FLIGHT_LEVELS.join(',') },
    batch: { type: 'string', default: '1,5,10,50,100' },
    backstop: { type: 'string', default: '0.5,30' },
    'grid-only': { type: 'boolean', default: false },
  },
});
const tasks = Number(values.tasks);
const limitMs = Number(values.limit) * 1000;
const repeat = Number(values.repeat);
const only = values.only.split(',');
const levels = values['in-flight'].split(',').map(Number);
const batchSizes = values.batch.split(',').map(Number);
const backstops = values.backstop.split(',').map(Number);
const gridOnly = values['grid-only'];

interface Setting {
  inFlight: number;
  tuning: PgBossTuning;
  note?: string;
}

/** The stats `burstWhenReadyExceeds` reads, refreshed as often as pg-boss allows (default 60 s). */
const STATS_EVERY_SECOND = { monitorIntervalSeconds: 1, superviseIntervalSeconds: 1, queueCacheIntervalSeconds: 1 };
const strict = (work: PgBossTuning['work'], more: Partial<PgBossTuning> = {}): PgBossTuning => ({
  work,
  notify: true,
  keyedBy: 'key_strict_fifo',
  keyOncePerInsert: true,
  ...more,
});

const keyedSettings: Setting[] = [];
for (const inFlight of levels) {
  if (inFlight === IN_FLIGHT && !gridOnly) {
    keyedSettings.push(
      {
        inFlight,
        tuning: strict({ batchSize: 50, pollingIntervalSeconds: 0.5, burstWhenBatchFull: true }, { keyOncePerInsert: false }),
        note: 'as bench/compare.ts had it',
      },
      {
        inFlight,
        tuning: strict({ batchSize: 50, pollingIntervalSeconds: 0.5, burstWhenBatchFull: true }, { notify: false }),
        note: 'polling alone',
      },
    );
  }
  for (const batchSize of batchSizes) {
    for (const backstop of backstops) {
      const wait = { pollingIntervalSeconds: Math.min(backstop, 0.5), notifyPollingIntervalSeconds: backstop };
      if (backstop === POLL_FLOOR.notifyPollingIntervalSeconds)
        keyedSettings.push({ inFlight, tuning: strict({ batchSize, ...POLL_FLOOR }) });
      // Ignored at batchSize 1 (manager.js resolveInterval): that run would repeat the one above.
      if (batchSize > 1) keyedSettings.push({ inFlight, tuning: strict({ batchSize, ...wait, burstWhenBatchFull: true }) });
    }
    if (backstops.includes(POLL_FLOOR.notifyPollingIntervalSeconds)) {
      keyedSettings.push({
        inFlight,
        tuning: strict({ batchSize, ...POLL_FLOOR, burstWhenReadyExceeds: 1 }, { instance: STATS_EVERY_SECOND }),
      });
    }
  }
  if (gridOnly) continue;
  keyedSettings.push(
    {
      inFlight,
      tuning: strict({ batchSize: 10, ...POLL_FLOOR, burstWhenBatchFull: true, groupConcurrency: 1 }, { keyedBy: 'group' }),
      note: 'groups, not key_strict_fifo',
    },
    {
      inFlight,
      tuning: strict({ batchSize: 10, ...POLL_FLOOR, burstWhenBatchFull: true, localGroupConcurrency: 1 }, { keyedBy: 'group' }),
      note: 'groups, not key_strict_fifo',
    },
  );
}

const drainSettings: Setting[] = levels.flatMap((inFlight) =>
  [20, 50, 100, 200].map((batchSize) => ({ inFlight, tuning: strict({ batchSize, ...POLL_FLOOR, burstWhenBatchFull: true }) })),
);

const began = performance.now();
const log = (line: string) => console.error(`[sweep ${Math.round((performance.now() - began) / 1000)}s] ${line}`);
const int = (x: number) => Math.round(x).toLocaleString('en-US');
const rate = (r: DrainRun) => r.jobs / (r.drainMs / 1000);

const cluster = await startCluster();
const out: string[] = [`# pg-boss sweep (${new Date().toISOString()})`, ''];
try {
  for (const [workload, settings] of [
    ['keyed', keyedSettings],
    ['drain', drainSettings],
  ] as const) {
    if (!only.includes(workload) || settings.length === 0) continue;
    const keyed = workload === 'keyed';
    const jobs = makeJobs(tasks, keyed ? KEYS : null);
    const contender = (s: Setting, i: number) =>
      pgBoss({ id: `B${i}`, label: describeWork(s.tuning), inFlight: s.inFlight, drain: s.tuning, keyed: s.tuning });
    const warm = settings[0] as Setting;
    await drain(cluster, contender(warm, 0), makeJobs(Math.min(tasks, 5_000), keyed ? KEYS : null), { keyed, finished: 0, limitMs });
    out.push(
      `## ${keyed ? `Keyed: ${int(tasks)} jobs over ${KEYS} keys, one running per key` : `Drain: ${int(tasks)} jobs, standard queue`}`,
      '',
      '| localConcurrency | settings | jobs/s | overlaps | FIFO violations | enqueue /s | statements/job | PG CPU ms/job | note |',
      '|--:|---|--:|--:|--:|--:|--:|--:|---|',
    );
    for (const [i, s] of settings.entries()) {
      const runs: DrainRun[] = [];
      for (let r = 0; r < repeat; r++) runs.push(await drain(cluster, contender(s, i + 1), jobs, { keyed, finished: 0, limitMs }));
      const partial = runs.filter((run) => run.partial).length;
      const median = (pick: (run: DrainRun) => number) => spread(runs.map(pick)).median;
      const rates = spread(runs.map(rate));
      const row = [
        s.inFlight,
        `${s.tuning.keyedBy === 'group' && keyed ? 'groups: ' : ''}${describeWork(s.tuning)}`,
        `${int(rates.median)}${repeat > 1 ? ` (${int(rates.min)}–${int(rates.max)})` : ''}${partial > 0 ? ` †${repeat > 1 ? ` ×${partial}` : ''}` : ''}`,
        runs.map((run) => run.overlaps).join(', '),
        runs.map((run) => run.fifoViolations).join(', '),
        int(median((run) => tasks / (run.enqueueMs / 1000))),
        median((run) => run.cost.statements / run.jobs).toFixed(3),
        median((run) => run.cost.pgCpuMs / run.jobs).toFixed(3),
        s.note ?? '',
      ];
      out.push(`| ${row.join(' | ')} |`);
      log(
        `${workload} ${s.inFlight} ${describeWork(s.tuning)}: ${runs.map((run) => `${int(rate(run))}${run.partial ? '†' : ''}`).join(', ')} jobs/s, overlaps ${row[3]}, FIFO ${row[4]}`,
      );
    }
    out.push('');
  }
} finally {
  await cluster.stop();
}
out.push(
  `Median (min–max) of ${repeat} run${repeat > 1 ? 's' : ''} a setting; overlaps and FIFO violations per run. † stopped at the ${limitMs / 1000} s limit with jobs left (×n: in n runs), the rate of the part done. Wall time ${Math.round((performance.now() - began) / 1000)} s.`,
  '',
);
const md = out.join('\n');
const dir = new URL('../results/', import.meta.url);
await mkdir(dir, { recursive: true });
const file = `pgboss-sweep-${new Date().toISOString().replace(/[:.]/g, '-')}.md`;
await writeFile(new URL(file, dir), md);
console.log(md);
log(`written to bench/results/${file}`);
