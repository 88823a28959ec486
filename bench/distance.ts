/**
 * `npm run bench:distance`: Sluice with its database far away, as Neon is from a Worker. The real
 * Worker in workerd (as `npm start` runs it: 4 shards × 6) reaches Postgres through the Neon
 * stand-in held at each RTT (src/node/ws-proxy.ts); the Node server through a TCP relay held the
 * same way (src/node/tcp-delay.ts). Per run, on a fresh Worker or server:
 * - drain: `--tasks` no-op tasks (2,000) enqueued in batches of 200, pushed to a local endpoint
 *   that answers 200; tasks/s from the first enqueue call to the last push;
 * - idle: 40 single enqueues, each once the last was pushed and 50 ms passed: the enqueue
 *   call, and from the call to its push, p50/p99;
 * - retry: 5 tasks whose first push fails, backoff 200 ms: how late the second push came after
 *   the first push's answer + 200 ms (its run_at), p50/max;
 * - per task, in the drain and the idle phase: round trips through the stand-in or relay,
 *   connections opened, subrequests (pushes, /sql requests, WebSockets) and Durable Object
 *   requests (RPC calls and alarms, counted inside the objects: bench/distance-worker.ts);
 * - on the Worker, where the round trips go: each Postgres frontend message and /sql request
 *   traced at the stand-in, classified by statement (a table for each Worker run).
 * - at rest (the first run of each path): what a deployment with nothing to do sends Postgres
 *   in `--idle-s` seconds (60; the Worker's cron fired once a minute, as `npm start` does).
 * Flags: --rtt 0,5,20,50 (both paths; default Worker 0,5,20,50 and Node 0,20), --tasks 2000,
 * --only worker|node, --idle-s 60, --trace (also writes each run's trace, with the bench's own
 * enqueue, answer and push marks, as JSON lines). Writes Markdown to bench/results/ (not kept in git).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { FrontendReader } from '../src/node/pg-frontend.ts';
import { startNodeSluice } from '../src/node/server.ts';
import { startTcpDelay } from '../src/node/tcp-delay.ts';
import { bundleWorker, startWorker } from '../src/node/worker-runtime.ts';
import { type ProxyStats, type ProxyTrace, startWsProxy } from '../src/node/ws-proxy.ts';
import { type Attribution, attribute } from './distance-trace.ts';
import { benchSetup } from './setup.ts';

const { values: flags } = parseArgs({
  options: {
    rtt: { type: 'string' },
    tasks: { type: 'string', default: '2000' },
    only: { type: 'string' },
    'idle-s': { type: 'string', default: '60' },
    trace: { type: 'boolean', default: false },
  },
});
const TASKS = Number(flags.tasks);
const BATCH = 200;
const SINGLES = 40;
const RETRIES = 5;
const BACKOFF_MS = 200;
const SHARDS = 4;
const STARTED = new Date().toISOString().replace(/[:.]/g, '-');
/** How long an idle deployment is watched (the first run of each path); 0: not at all. */
const REST_S = Number(flags['idle-s']);
/** Past the shards' and pools' linger (worker/pusher.ts LINGER_MS) before the watch starts. */
const SETTLE_MS = 12_000;
const rtts = (fallback: string) => (flags.rtt ?? fallback).split(',').map(Number);
type Path = 'worker' | 'hyperdrive' | 'node';
const only = flags.only ? new Set(flags.only.split(',')) : null;
const RUNS: Array<{ path: Path; rtt: number }> = [
  ...(only && !only.has('worker') ? [] : rtts('0,5,20,50').map((rtt) => ({ path: 'worker' as const, rtt }))),
  ...(only && !only.has('hyperdrive') ? [] : rtts('0,20,50').map((rtt) => ({ path: 'hyperdrive' as const, rtt }))),
  ...(only && !only.has('node') ? [] : rtts('0,20').map((rtt) => ({ path: 'node' as const, rtt }))),
];
const PATH_NAMES: Record<Path, string> = { worker: 'Worker', hyperdrive: 'Worker, Hyperdrive', node: 'Node' };
if (!Number.isInteger(TASKS) || TASKS < BATCH || RUNS.some((r) => !Number.isInteger(r.rtt) || r.rtt < 0)) {
  console.error('bench:distance: --tasks must be a whole number ≥ 200 and --rtt whole milliseconds ≥ 0');
  process.exit(2);
}

// --- the endpoint: answers 200 (`/fail-once`: 500 the first time), and says when ---------------
const pushes = new Map<string, Array<{ at: number; answeredAt: number }>>();
let pushed = 0;
const endpoint = createServer((req, res) => {
  const id = String(req.headers['sluice-task-id']);
  const seen = pushes.get(id) ?? [];
  pushes.set(id, seen);
  const push = { at: performance.now(), answeredAt: 0 };
  seen.push(push);
  pushed++;
  req.resume();
  res.on('finish', () => {
    push.answeredAt = performance.now();
  });
  res.writeHead(req.url === '/fail-once' && seen.length === 1 ? 500 : 200).end();
});
await new Promise<void>((r) => endpoint.listen(0, '127.0.0.1', r));
const target = `http://127.0.0.1:${(endpoint.address() as { port: number }).port}`;

const setup = await benchSetup();
const script = await bundleWorker(new URL('./distance-worker.ts', import.meta.url).pathname);
const admin = new pg.Pool({ connectionString: setup.databaseUrl, max: 2 });
const pgAddress = new URL(setup.databaseUrl);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(what: string, done: () => boolean | Promise<boolean>, timeoutMs = 600_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}
async function call(base: string, path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { ...headers, authorization: `Bearer ${setup.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== 201) throw new Error(`${path}: ${res.status} ${text}`);
  return JSON.parse(text) as { id?: string };
}
const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.max(0, Math.ceil(p * s.length) - 1)] ?? Number.NaN;
};
function addCounts(into: Record<string, number>, more: Record<string, number>): Record<string, number> {
  for (const [k, n] of Object.entries(more)) into[k] = (into[k] ?? 0) + n;
  return into;
}
const settled = async () => (await admin.query<{ n: number }>('select count(*)::int as n from sluice.tasks')).rows[0]?.n === 0;

interface Counters {
  roundTrips: number;
  connections: number;
  sqlRequests: number;
  webSockets: number;
  pushes: number;
  doRequests: Record<string, number>;
}
interface Phase {
  tasks: number;
  counters: Counters;
  attribution: Attribution;
}
interface Row {
  path: Path;
  rtt: number;
  drainPerS: number;
  callMs: number[];
  pushMs: number[];
  retryLateMs: number[];
  drain: Phase;
  idle: Phase;
  /** Nothing to do for `--idle-s` (60) seconds, after connections linger out; `tasks` counts minutes. */
  rest: Phase | null;
  /** Round trips to Postgres in each minute of the rest (the cron's included). */
  restMinutes: number[];
  /** The first task after the rest: its enqueue call to its push, ms. */
  firstAfterRestMs: number | null;
}

/** One run: a fresh Worker (or Node server) behind a fresh stand-in at `rtt`. */
async function run(path: Path, rtt: number, rest: boolean): Promise<Row> {
  await admin.query('truncate sluice.tasks, sluice.finished, sluice.attempts, sluice.lanes, sluice.queues, sluice.key_limits cascade');
  pushes.clear();
  const trace: ProxyTrace[] = [];
  const marks: Array<{ at: number; mark: string; id?: string | undefined }> = [];
  let app: { url: string; close(): Promise<void> };
  let stats: () => Omit<ProxyStats, 'messages'>;
  let doRequests: () => Promise<Record<string, number>> = async () => ({});
  let closeProxy: () => Promise<void>;
  /** The Worker's cron, fired as `npm start` fires it: once a minute. */
  let cron: () => Promise<void> = async () => {};
  if (path === 'worker') {
    const proxy = await startWsProxy(
      { host: pgAddress.hostname, port: Number(pgAddress.port) },
      { rttMs: rtt, trace: (e) => trace.push(e) },
    );
    const worker = await startWorker({ script, vars: { ...setup.env, SLUICE_NEON_WS_PROXY: proxy.address } });
    app = worker;
    cron = () => worker.scheduled();
    stats = () => proxy.stats();
    doRequests = async () => (await (await fetch(`${worker.url}/__bench/do-requests?shards=${SHARDS}`)).json()) as Record<string, number>;
    closeProxy = () => proxy.close();
  } else {
    // The same trace as the stand-in's WebSocket path, read from the relay's client bytes.
    const readers = new Map<number, FrontendReader>();
    const relay = await startTcpDelay({ host: pgAddress.hostname, port: Number(pgAddress.port) }, rtt, (conn, chunk) => {
      const reader = readers.get(conn) ?? new FrontendReader();
      readers.set(conn, reader);
      for (const m of reader.read(chunk)) trace.push({ at: Date.now(), transport: 'ws', conn, event: 'message', ...m });
    });
    const url = new URL(setup.databaseUrl);
    url.host = `${relay.host}:${relay.port}`;
    if (path === 'hyperdrive') {
      // pg through the HYPERDRIVE binding, which Miniflare connects straight to the relay: no
      // pool near the database, as Hyperdrive has, so each API request opens a connection here.
      const worker = await startWorker({ script, vars: { ...setup.env, SLUICE_DATABASE_PATH: 'hyperdrive' }, hyperdrive: url.toString() });
      app = worker;
      cron = () => worker.scheduled();
      doRequests = async () => (await (await fetch(`${worker.url}/__bench/do-requests?shards=${SHARDS}`)).json()) as Record<string, number>;
    } else {
      app = await startNodeSluice({ env: { ...setup.env, DATABASE_URL: url.toString() } });
    }
    stats = () => ({ ...relay.stats(), webSockets: 0, sqlRequests: 0 });
    closeProxy = () => relay.close();
  }
  /** Counts from here until the returned function is called, and the trace's events meanwhile. */
  const measure = async () => {
    const before = { ...stats(), pushes: pushed };
    const from = trace.length;
    await doRequests();
    /** `doEarlier`: Durable Object counts read during the phase (an idle object is evicted with its counts). */
    return async (tasks: number, doEarlier: Record<string, number> = {}): Promise<Phase> => {
      const after = stats();
      const counters: Counters = {
        roundTrips: after.roundTrips - before.roundTrips,
        connections: after.connections - before.connections,
        sqlRequests: after.sqlRequests - before.sqlRequests,
        webSockets: after.webSockets - before.webSockets,
        pushes: pushed - before.pushes,
        doRequests: addCounts(doEarlier, await doRequests()),
      };
      return { tasks, counters, attribution: attribute(trace.slice(from), path === 'worker' ? 'WebSocket' : 'TCP') };
    };
  };
  try {
    // Warm: the bundle's first requests, the first connections.
    await call(
      app.url,
      '/v1/tasks/batch',
      { tasks: Array.from({ length: 20 }, () => ({ url: `${target}/ok` })) },
      { prefer: 'return=minimal' },
    );
    await until('the warm-up', settled);

    // Drain.
    let end = await measure();
    const before = pushed;
    const started = performance.now();
    for (let i = 0; i < TASKS; i += BATCH) {
      const tasks = Array.from({ length: Math.min(BATCH, TASKS - i) }, () => ({ url: `${target}/ok` }));
      await call(app.url, '/v1/tasks/batch', { tasks }, { prefer: 'return=minimal' });
    }
    await until('the drain', () => pushed - before >= TASKS);
    const drainPerS = TASKS / ((performance.now() - started) / 1000);
    await until('the drain to settle', settled);
    await sleep(1_000);
    const drain = await end(TASKS);

    // Idle: one task at a time.
    const callMs: number[] = [];
    const pushMs: number[] = [];
    end = await measure();
    for (let i = 0; i < SINGLES; i++) {
      await sleep(50);
      const t0 = performance.now();
      const sent = Date.now();
      const { id } = await call(app.url, '/v1/tasks', { url: `${target}/ok` });
      callMs.push(performance.now() - t0);
      marks.push({ at: sent, mark: 'enqueue sent', id }, { at: Date.now(), mark: 'enqueue answered', id });
      await until('a push', () => (pushes.get(String(id))?.length ?? 0) >= 1, 30_000);
      const at = pushes.get(String(id))?.[0]?.at ?? 0;
      pushMs.push(at - t0);
      marks.push({ at: Math.round(Date.now() - (performance.now() - at)), mark: 'pushed', id });
    }
    await until('the idle tasks to settle', settled);
    await sleep(1_000);
    const idle = await end(SINGLES);

    // Retries: how late the second push comes after its run_at.
    const retryLateMs: number[] = [];
    for (let i = 0; i < RETRIES; i++) {
      const { id } = await call(app.url, '/v1/tasks', {
        url: `${target}/fail-once`,
        backoff: { initial_ms: BACKOFF_MS, max_ms: BACKOFF_MS, factor: 1, jitter: 0 },
      });
      await until('a retry', () => (pushes.get(String(id))?.length ?? 0) >= 2, 30_000);
      const [first, second] = pushes.get(String(id)) ?? [];
      retryLateMs.push((second?.at ?? 0) - ((first?.answeredAt ?? 0) + BACKOFF_MS));
      await sleep(100);
    }

    // At rest: what a deployment with nothing to do sends Postgres (cron once a minute on the
    // Worker), minute by minute; then how soon the first task after it is pushed.
    let resting: Phase | null = null;
    const restMinutes: number[] = [];
    let firstAfterRestMs: number | null = null;
    if (rest && REST_S > 0) {
      await until('the retries to settle', settled);
      await sleep(SETTLE_MS);
      end = await measure();
      const restEnd = Date.now() + REST_S * 1000;
      const doCounts: Record<string, number> = {};
      while (Date.now() < restEnd) {
        const minuteStart = stats().roundTrips;
        await cron();
        await sleep(Math.min(5_000, restEnd - Date.now()));
        addCounts(doCounts, await doRequests());
        await sleep(Math.min(55_000, restEnd - Date.now()));
        restMinutes.push(stats().roundTrips - minuteStart);
      }
      resting = await end(REST_S / 60, doCounts);
      const t0 = performance.now();
      const { id } = await call(app.url, '/v1/tasks', { url: `${target}/ok` });
      await until('the first push after rest', () => (pushes.get(String(id))?.length ?? 0) >= 1, 30_000);
      firstAfterRestMs = (pushes.get(String(id))?.[0]?.at ?? 0) - t0;
    }
    return { path, rtt, drainPerS, callMs, pushMs, retryLateMs, drain, idle, rest: resting, restMinutes, firstAfterRestMs };
  } finally {
    await app.close();
    await closeProxy();
    if (flags.trace) {
      const events = [...trace, ...marks].sort((a, b) => a.at - b.at);
      const file = new URL(`./results/distance-${STARTED}-${path}-${rtt}.trace.jsonl`, import.meta.url);
      await mkdir(new URL('./results/', import.meta.url), { recursive: true });
      await writeFile(file, events.map((e) => JSON.stringify(e)).join('\n'));
      console.error(`bench:distance: trace written to ${file.pathname}`);
    }
  }
}

// --- the report -----------------------------------------------------------------------------
const f0 = (n: number) => n.toFixed(0);
const f1 = (n: number) => n.toFixed(1);
const f2 = (n: number) => n.toFixed(2);
const sum = (o: Record<string, number>) => Object.values(o).reduce((a, n) => a + n, 0);
const lines: string[] = [];
const say = (line = '') => {
  lines.push(line);
  console.log(line);
};

const commit = (await import('node:child_process')).execSync('git rev-parse --short HEAD').toString().trim();
const rows: Row[] = [];
try {
  for (const [i, { path, rtt }] of RUNS.entries()) {
    console.error(`bench:distance: ${path} at RTT ${rtt} ms…`);
    rows.push(await run(path, rtt, RUNS.findIndex((r) => r.path === path) === i));
  }
} finally {
  await admin.end();
  endpoint.closeAllConnections();
  endpoint.close();
  // What a server left connected must not end the bench once its Postgres stops.
  process.on('uncaughtException', (error) => console.error(`bench:distance: after the runs: ${error.message}`));
  await setup.close();
}

say(`# bench:distance, ${new Date().toISOString()}, commit ${commit}`);
say();
say(
  `${cpus().length} cores (${cpus()[0]?.model.trim()}), Node ${process.version}, embedded PostgreSQL; ${TASKS} no-op tasks a drain, ` +
    `${SINGLES} idle enqueues, ${RETRIES} retries; Worker ${SHARDS} shards × 6, Node parallelism 64.`,
);
say();
say(
  '| path | RTT | drain, tasks/s | ÷ RTT 0 | enqueue call p50 / p99, ms | enqueue → push p50 / p99, ms | retry late p50 / max, ms | round trips / task, drain (idle) | connections / task, drain (idle) | subrequests / task, drain (idle) | DO requests / task, drain (idle) |',
);
say('|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|');
for (const r of rows) {
  const base = rows.find((x) => x.path === r.path && x.rtt === 0);
  const per = (p: Phase, n: number) => n / p.tasks;
  const both = (get: (p: Phase) => number, digits = f2) => `${digits(per(r.drain, get(r.drain)))} (${digits(per(r.idle, get(r.idle)))})`;
  const node = r.path === 'node';
  say(
    `| ${PATH_NAMES[r.path]} | ${r.rtt} ms | ${f0(r.drainPerS)} | ${base ? f2(r.drainPerS / base.drainPerS) : '—'} | ` +
      `${f1(percentile(r.callMs, 0.5))} / ${f1(percentile(r.callMs, 0.99))} | ${f1(percentile(r.pushMs, 0.5))} / ${f1(percentile(r.pushMs, 0.99))} | ` +
      `${f1(percentile(r.retryLateMs, 0.5))} / ${f1(Math.max(...r.retryLateMs))} | ${both((p) => p.counters.roundTrips)} | ` +
      `${both(
        (p) => p.counters.connections,
        (n) => n.toFixed(3),
      )} | ` +
      `${node ? '—' : both((p) => p.counters.pushes + p.counters.sqlRequests + p.counters.webSockets)} | ` +
      `${node ? '—' : both((p) => sum(p.counters.doRequests))} |`,
  );
}
say();
say('Durable Object requests by kind, per task, drain (idle):');
for (const r of rows.filter((x) => x.path !== 'node')) {
  const kinds = [...new Set([...Object.keys(r.drain.counters.doRequests), ...Object.keys(r.idle.counters.doRequests)])].sort();
  const per = (p: Phase, k: string) => f2((p.counters.doRequests[k] ?? 0) / p.tasks);
  say(`- ${PATH_NAMES[r.path]}, RTT ${r.rtt} ms: ${kinds.map((k) => `${k} ${per(r.drain, k)} (${per(r.idle, k)})`).join(', ')}`);
}
for (const r of rows) {
  const columns: Array<[string, Phase]> = [
    ['drain, per task', r.drain],
    ['idle, per task', r.idle],
    ...(r.rest ? [['at rest, per minute', r.rest] as [string, Phase]] : []),
  ];
  say();
  say(`## Where the round trips go: ${PATH_NAMES[r.path]}, RTT ${r.rtt} ms (traced at the ${r.path === 'worker' ? 'stand-in' : 'relay'})`);
  say();
  say(`| round trip | ${columns.map(([name]) => name).join(' | ')} | where |`);
  say(`|---|${columns.map(() => '--:|').join('')}---|`);
  const kinds = [...new Set(columns.flatMap(([, p]) => Object.keys(p.attribution)))].sort(
    (a, b) => (r.idle.attribution[b]?.roundTrips ?? 0) - (r.idle.attribution[a]?.roundTrips ?? 0) || a.localeCompare(b),
  );
  for (const k of kinds) {
    const where = columns.map(([, p]) => p.attribution[k]?.where).find((w) => w) ?? '';
    say(`| ${k} | ${columns.map(([, p]) => f2((p.attribution[k]?.roundTrips ?? 0) / p.tasks)).join(' | ')} | ${where} |`);
  }
  const total = (p: Phase) => Object.values(p.attribution).reduce((a, v) => a + v.roundTrips, 0);
  say(
    `| all, traced (the relay's count) | ${columns.map(([, p]) => `${f2(total(p) / p.tasks)} (${f2(p.counters.roundTrips / p.tasks)})`).join(' | ')} | |`,
  );
  if (r.rest) {
    const c = r.rest.counters;
    const perMin = (n: number) => f1(n / r.rest!.tasks);
    say(
      `\nAt rest, minute by minute, round trips to Postgres: ${r.restMinutes.join(', ')}; the first task after it pushed ` +
        `${f1(r.firstAfterRestMs ?? Number.NaN)} ms after its enqueue call.`,
    );
    say(
      `\nAt rest, per minute: ${perMin(c.connections)} connections, ${perMin(c.roundTrips)} round trips` +
        (r.path !== 'node'
          ? `, ${perMin(c.sqlRequests)} /sql requests, ${perMin(c.webSockets)} WebSockets, DO requests ${JSON.stringify(c.doRequests)}`
          : '') +
        '.',
    );
  }
  const others = columns.flatMap(([, p]) =>
    Object.entries(p.attribution).flatMap(([k, v]) => (k.startsWith('other') ? Object.entries(v.texts ?? {}) : [])),
  );
  if (others.length > 0) say(`\nOther statements: ${others.map(([t, n]) => `${n}× \`${t}\``).join('; ')}`);
}

await mkdir(new URL('./results/', import.meta.url), { recursive: true });
const file = new URL(`./results/distance-${STARTED}.md`, import.meta.url);
await writeFile(file, `${lines.join('\n')}\n`);
console.error(`bench:distance: written to ${file.pathname}`);
