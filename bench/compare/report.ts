/** Medians, ratios and percentiles of the measured runs, and the Markdown that shows them. */
import type { Contender, Role } from './contender.ts';
import type { DrainRun, LatencyRun } from './workloads.ts';

export interface Machine {
  nproc: number;
  cpu: string;
  node: string;
  postgres: string;
  peers: Record<string, string>;
  sluiceCommit: string;
}

export interface Results {
  startedAt: string;
  wallSeconds: number;
  command: string;
  machine: Machine;
  postgresSettings: Record<string, string>;
  options: {
    tasks: number;
    iterations: number;
    warmupTasks: number;
    finished: number;
    workloads: string[];
    keys: number;
    drainLimitSeconds: number;
  };
  contenders: Array<Pick<Contender, 'id' | 'kind' | 'inFlight' | 'label' | 'config' | 'role'>>;
  /** Measured iterations only (the warm-up is dropped), by contender id, in run order. */
  drain: Record<string, DrainRun[]>;
  keyed: Record<string, DrainRun[]>;
  latency: Record<string, LatencyRun>;
}

export interface Spread {
  median: number;
  min: number;
  max: number;
}

export function spread(values: readonly number[]): Spread {
  const s = [...values].sort((a, b) => a - b);
  return { median: quantile(s, 0.5), min: s[0] ?? Number.NaN, max: s.at(-1) ?? Number.NaN };
}

/** Linear interpolation between the closest ranks, on sorted values. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const at = (sorted.length - 1) * q;
  const lo = Math.floor(at);
  const hi = Math.ceil(at);
  return (sorted[lo] as number) + ((sorted[hi] as number) - (sorted[lo] as number)) * (at - lo);
}

const drainRate = (r: DrainRun) => r.jobs / (r.drainMs / 1000);
const endToEndRate = (r: DrainRun) => r.jobs / ((r.enqueueMs + r.drainMs) / 1000);
const enqueueRate = (r: DrainRun) => r.jobs / (r.enqueueMs / 1000);

/** Median (min–max) over iterations of ours ÷ theirs, iteration by iteration. */
function ratio(
  ours: readonly DrainRun[] | undefined,
  theirs: readonly DrainRun[] | undefined,
  rate: (r: DrainRun) => number,
): Spread | null {
  if (!ours?.length || !theirs?.length) return null;
  const n = Math.min(ours.length, theirs.length);
  return spread(Array.from({ length: n }, (_, i) => rate(ours[i] as DrainRun) / rate(theirs[i] as DrainRun)));
}

const int = (x: number) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '–');
const fixed = (x: number, digits: number) => (Number.isFinite(x) ? x.toFixed(digits) : '–');
const rateCell = (s: Spread, partial = false) => `**${int(s.median)}**${partial ? ' †' : ''} (${int(s.min)}–${int(s.max)})`;
const ratioCell = (s: Spread | null) => (s ? `**${fixed(s.median, 2)}×** (${fixed(s.min, 2)}–${fixed(s.max, 2)})` : '–');
const perJob = (runs: readonly DrainRun[], pick: (r: DrainRun) => number) => spread(runs.map((r) => pick(r) / r.jobs)).median;

function drainTable(results: Results, runsById: Record<string, DrainRun[]>, keyed: boolean): string[] {
  const head = `| contender | enqueue /s | drain jobs/s | enqueue + drain /s |${keyed ? ' overlaps in a key | FIFO violations |' : ''} statements/job | PG exec ms/job | WAL bytes/job | PG CPU ms/job | Node CPU ms/job |`;
  const lines = [head, `|---|--:|--:|--:|${keyed ? '--:|--:|' : ''}--:|--:|--:|--:|--:|`];
  for (const c of results.contenders) {
    const runs = runsById[c.id];
    if (!runs?.length) continue;
    const cost = [
      fixed(
        perJob(runs, (r) => r.cost.statements),
        3,
      ),
      fixed(
        perJob(runs, (r) => r.cost.execMs),
        3,
      ),
      int(perJob(runs, (r) => r.cost.walBytes)),
      fixed(
        perJob(runs, (r) => r.cost.pgCpuMs),
        3,
      ),
      fixed(
        perJob(runs, (r) => r.cost.nodeCpuMs),
        3,
      ),
    ];
    const cells = [
      int(spread(runs.map(enqueueRate)).median),
      rateCell(
        spread(runs.map(drainRate)),
        runs.some((r) => r.partial),
      ),
      rateCell(spread(runs.map(endToEndRate))),
      ...(keyed ? [runs.map((r) => r.overlaps).join(', '), runs.map((r) => r.fifoViolations).join(', ')] : []),
    ];
    lines.push(`| ${c.label} | ${[...cells, ...cost].join(' | ')} |`);
  }
  return lines;
}

/**
 * Sluice's rows ÷ the contenders of `role` (peers, or the ceiling), one column per kind; each row
 * against the one of that kind at the row's in-flight level, or at the level the row names (a
 * peer may do better at fewer).
 */
function ratioTable(
  results: Results,
  runsById: Record<string, DrainRun[]>,
  role: Role,
  rows: Array<[id: string, what: string, rate: (r: DrainRun) => number, theirLevel?: number]>,
): string[] {
  const others = results.contenders.filter((c) => c.role === role && runsById[c.id]?.length);
  const kinds = [...new Set(others.map((c) => c.kind))];
  const lines = [`| Sluice ÷ | ${kinds.join(' | ')} |`, `|---|${kinds.map(() => '--:|').join('')}`];
  for (const [id, what, rate, theirLevel] of rows) {
    const ours = results.contenders.find((c) => c.id === id);
    if (!ours || !runsById[id]?.length) continue;
    const level = theirLevel ?? ours.inFlight;
    const theirs = (kind: string) => others.find((c) => c.kind === kind && c.inFlight === level)?.id ?? '';
    lines.push(`| ${what} | ${kinds.map((k) => ratioCell(ratio(runsById[id], runsById[theirs(k)], rate))).join(' | ')} |`);
  }
  return lines;
}

function latencyTable(results: Results): string[] {
  const lines = ['| contender | p50 ms | p95 ms | p99 ms | max ms | enqueue call p50 ms |', '|---|--:|--:|--:|--:|--:|'];
  for (const c of results.contenders) {
    const run = results.latency[c.id];
    if (!run) continue;
    const s = [...run.samples].sort((a, b) => a - b);
    const call = [...run.enqueueCall].sort((a, b) => a - b);
    lines.push(
      `| ${c.label} | ${[0.5, 0.95, 0.99, 1].map((q) => fixed(quantile(s, q), 2)).join(' | ')} | ${fixed(quantile(call, 0.5), 2)} |`,
    );
  }
  return lines;
}

export function markdown(results: Results): string {
  const { options: o, machine: m } = results;
  const n = o.tasks.toLocaleString('en-US');
  const out = [
    `# Sluice beside graphile-worker and pg-boss (${results.startedAt})`,
    '',
    `${m.nproc} cores (${m.cpu}), Node ${m.node}, PostgreSQL ${m.postgres} (embedded, one server for all; ${Object.entries(
      results.postgresSettings,
    )
      .map(([k, v]) => `${k}=${v}`)
      .join(', ')}), ${Object.entries(m.peers)
      .map(([k, v]) => `${k} ${v}`)
      .join(
        ', ',
      )}, Sluice ${m.sluiceCommit}. ${o.iterations} interleaved iterations after a warm-up of ${o.warmupTasks.toLocaleString('en-US')} jobs; a fresh database per contender per iteration; ${o.finished > 0 ? `Sluice's table pre-filled with ${o.finished.toLocaleString('en-US')} succeeded tasks; ` : ''}wall time ${Math.round(results.wallSeconds)} s.`,
    '',
  ];
  if (Object.keys(results.drain).length > 0) {
    out.push(
      `## Drain: ${n} no-op jobs, one process; every contender at 16 and at 64 in flight`,
      '',
      'Median (min–max) over iterations. Drain: worker start to the N-th handler completion (Sluice push: to every task `succeeded` in the database). Costs per job, medians, read around the drain (worker start to worker stopped). The bare signed-push loop has no queue: its enqueue only hands the jobs to its process.',
      '',
      ...drainTable(results, results.drain, false),
      '',
      'Sluice ÷ the peers, each at the same in-flight level, and Sluice at 64 ÷ the peers at 16:',
      '',
      ...ratioTable(results, results.drain, 'peer', [
        ['S16', 'engine, 16 ÷ 16, drain', drainRate],
        ['S', 'engine, 64 ÷ 64, drain', drainRate],
        ['S', 'engine, 64 ÷ 16, drain', drainRate, 16],
        ['Sp16', 'push, 16 ÷ 16, drain', drainRate],
        ['Sp', 'push, 64 ÷ 64, drain', drainRate],
        ['Sp', 'push, 64 ÷ 16, drain', drainRate, 16],
        ['Sp16', 'push, 16 ÷ 16, enqueue + drain', endToEndRate],
        ['Sp', 'push, 64 ÷ 64, enqueue + drain', endToEndRate],
        ['Sp', 'push, 64 ÷ 16, enqueue + drain', endToEndRate, 16],
      ]),
      '',
      'The ceiling: Sluice push ÷ the bare loop of the same signed POSTs to the same endpoint, with no queue and no database, at the same level:',
      '',
      ...ratioTable(results, results.drain, 'ceiling', [
        ['Sp16', 'push, 16 ÷ 16, drain', drainRate],
        ['Sp', 'push, 64 ÷ 64, drain', drainRate],
      ]),
      '',
    );
  }
  if (Object.keys(results.keyed).length > 0) {
    out.push(
      `## Keyed: ${n} jobs over ${o.keys} keys, at most 1 running per key`,
      '',
      `Overlaps: jobs started while another of their key ran, per iteration. FIFO violations: jobs that started before an earlier job of their key, per iteration. † = stopped at the ${o.drainLimitSeconds} s limit with jobs left; the rate and costs are of the part done.`,
      '',
      ...drainTable(results, results.keyed, true),
      '',
      'Sluice ÷ the peers, each at the same in-flight level, and Sluice at 64 ÷ the peers at 16:',
      '',
      ...ratioTable(results, results.keyed, 'peer', [
        ['S16', 'engine, 16 ÷ 16, keyed drain', drainRate],
        ['S', 'engine, 64 ÷ 64, keyed drain', drainRate],
        ['S', 'engine, 64 ÷ 16, keyed drain', drainRate, 16],
        ['Sp16', 'push, 16 ÷ 16, keyed drain', drainRate],
        ['Sp', 'push, 64 ÷ 64, keyed drain', drainRate],
        ['Sp', 'push, 64 ÷ 16, keyed drain', drainRate, 16],
        ['Sp16', 'push, 16 ÷ 16, keyed enqueue + drain', endToEndRate],
        ['Sp', 'push, 64 ÷ 64, keyed enqueue + drain', endToEndRate],
        ['Sp', 'push, 64 ÷ 16, keyed enqueue + drain', endToEndRate, 16],
      ]),
      '',
    );
  }
  if (Object.keys(results.latency).length > 0) {
    out.push(
      '## Latency, idle worker',
      '',
      `${results.latency[Object.keys(results.latency)[0] as string]?.samples.length ?? 0} single enqueues 50 ms apart; from the enqueue call returning to the handler starting (Sluice: the push arriving at the endpoint), one clock.`,
      '',
      ...latencyTable(results),
      '',
    );
  }
  out.push('## Configurations', '', ...results.contenders.map((c) => `* **${c.label}** (${c.id}): ${c.config}`), '');
  return out.join('\n');
}
