/**
 * `npm run bench:sustain`: does Sluice hold a steady state at volume? Tasks are enqueued at a
 * fixed rate (open loop: the schedule does not wait for the server) in batches over the HTTP API,
 * pushed signed to a no-op endpoint, for a given time, with a short retention. Every sample
 * (a minute by default) prints: pushes/s, enqueue returned → push arrived (p50, p99), rows in the
 * hot table, rows retained in history, lane rows, bytes of every Sluice table, WAL bytes per task
 * pushed. It ends with a verdict: steady when, after a warm-up, the second half's peaks of hot rows,
 * lane rows and bytes stay within 10% of the first half's, retained rows within 10% of the first half's peak or
 * of the designed bound (a window, an eighth, a sweep), the median minute's p99 within 10% of the
 * first half's, and the run kept up with the rate.
 *
 *   --rate n        tasks/s (default 500)       --minutes n     duration (default 10)
 *   --retention d   SLUICE_RETENTION (1m)        --batch n       tasks a POST (100)
 *   --sample-s n    seconds between samples (60) --worker        the Worker (workerd) instead of `serve`
 *   --features      every task in a W3C trace (traceparent), every tenth with a callback_url
 *                   (its notification is a task too: counted apart, not in pushes/s)
 *   --keys n        tasks spread over n concurrency keys, each at most 4 at once (the keyed walk);
 *                   more keys than tasks: each task a key of its own (keys that come and go)
 *   --dedup-ttl-ms n  every task with a dedup key of its own, kept n ms after it finishes (at most the
 *                   retention window): each enqueue looks its key up in history, each finished task
 *                   is a dedup record in it (docs/DESIGN.md §10)
 *   --pull n        a pull queue instead: n consumers in this process long-poll it (POST
 *                   /v1/queues/sustain/lease, up to 50 a pull) and complete each task with its
 *                   lease; "pushed" then counts tasks pulled, and latency runs to the pull's answer
 *   --explain-ms n  Postgres logs to stderr the plan of every statement (nested ones included)
 *                   that took n ms or more (auto_explain), every autovacuum and every lock
 *                   waited on for 20 ms: what a slow minute was doing
 *   --explain-rows  with --explain-ms, each plan with the rows and buffers of every node (no
 *                   timings: those would slow every statement): where a slow statement read
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { parseRetention } from '../src/config-fields.ts';
import { migrateDatabase } from '../src/node/migrations.ts';
import { freePort, startEmbeddedPostgres } from '../src/node/postgres.ts';
import { bundleWorker, startWorker } from '../src/node/worker-runtime.ts';
import { startWsProxy } from '../src/node/ws-proxy.ts';
import { generateApiKey } from '../src/security/api-keys.ts';
import { generateSigningJwk } from '../src/security/keyring.ts';
import { BIN, spawnReady } from '../test/helpers/process.ts';

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '500' },
    minutes: { type: 'string', default: '10' },
    retention: { type: 'string', default: '1m' },
    batch: { type: 'string', default: '100' },
    'sample-s': { type: 'string', default: '60' },
    worker: { type: 'boolean', default: false },
    features: { type: 'boolean', default: false },
    pull: { type: 'string' },
    keys: { type: 'string' },
    'dedup-ttl-ms': { type: 'string' },
    'explain-ms': { type: 'string' },
    'explain-rows': { type: 'boolean' },
  },
});
const consumers = values.pull === undefined ? 0 : Number(values.pull);
if (values.pull !== undefined && !(Number.isInteger(consumers) && consumers > 0))
  throw new Error('--pull: a number of consumers, at least 1');
const keys = values.keys === undefined ? 0 : Number(values.keys);
if (values.keys !== undefined && !(Number.isInteger(keys) && keys > 0)) throw new Error('--keys: a number of keys, at least 1');
const dedupTtlMs = values['dedup-ttl-ms'] === undefined ? 0 : Number(values['dedup-ttl-ms']);
if (values['dedup-ttl-ms'] !== undefined && !(Number.isInteger(dedupTtlMs) && dedupTtlMs > 0))
  throw new Error('--dedup-ttl-ms: a number of milliseconds, at least 1');
/** Each key's limit with --keys: enough for the rate, few enough that keys fill and the walk skips them. */
const KEY_LIMIT = 4;
const rate = Number(values.rate);
const durationMs = Number(values.minutes) * 60_000;
const batch = Number(values.batch);
const sampleMs = Number(values['sample-s']) * 1000;
if (![rate, durationMs, batch, sampleMs].every((x) => Number.isFinite(x) && x > 0))
  throw new Error('--rate, --minutes, --batch, --sample-s: positive numbers');
const path = `${values.worker ? 'Worker (workerd)' : 'Node server (npm run serve)'}${consumers ? `, pulled by ${consumers} consumers` : ''}${keys ? `, ${keys} keys of at most ${KEY_LIMIT}` : ''}${dedupTtlMs ? `, every task a dedup key kept ${dedupTtlMs} ms` : ''}`;

// Postgres, the endpoint, the server.
const dir = await mkdtemp(join(tmpdir(), 'sluice-sustain-'));
const explainMs = values['explain-ms'] === undefined ? null : Number(values['explain-ms']);
if (explainMs !== null && !(explainMs >= 0)) throw new Error('--explain-ms: a number of milliseconds');
const explain: Record<string, string> =
  explainMs === null
    ? {}
    : {
        session_preload_libraries: 'auto_explain',
        'auto_explain.log_min_duration': `${explainMs}ms`,
        'auto_explain.log_nested_statements': 'on',
        ...(values['explain-rows']
          ? { 'auto_explain.log_analyze': 'on', 'auto_explain.log_timing': 'off', 'auto_explain.log_buffers': 'on' }
          : {}),
        log_autovacuum_min_duration: '0',
        log_lock_waits: 'on',
        deadlock_timeout: '20ms',
      };
const postgres = await startEmbeddedPostgres({ dir, persistent: false, log: explainMs !== null, settings: { fsync: 'off', ...explain } });
const admin = new pg.Pool({ connectionString: postgres.url('postgres'), max: 2 });
await admin.query('create database sustain');
const url = postgres.url('sustain');
await migrateDatabase(url);
const db = new pg.Pool({ connectionString: url, max: 2 });
// Postgres stops at the end with the pools' last connections open: not an error worth a stack.
for (const pool of [admin, db]) pool.on('error', () => {});

/** Enqueue-returned times by task number, and what arrived. */
const returnedAt = new Map<number, number>();
let arrivals: number[] = [];
let pushed = 0;
/** Callbacks received (--features). */
let callbacks = 0;
const endpoint = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (req.url === '/callback') {
      callbacks++;
      return void res.writeHead(200).end();
    }
    arrived((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { n: number }).n);
    res.writeHead(200).end();
  });
});
/** Task n reached its worker (pushed to the endpoint, or pulled). */
function arrived(n: number): void {
  const sent = returnedAt.get(n);
  // One that beats its enqueue's answer (the API answers after commit) counts as 0 ms.
  arrivals.push(sent === undefined ? 0 : Math.max(0, performance.now() - sent));
  returnedAt.delete(n);
  pushed++;
}
await new Promise<void>((r) => endpoint.listen(0, '127.0.0.1', r));
const target = `http://127.0.0.1:${(endpoint.address() as { port: number }).port}/noop`;

const key = await generateApiKey('sustain');
const env: Record<string, string> = {
  DATABASE_URL: url,
  SLUICE_API_KEYS: JSON.stringify([key.entry]),
  SLUICE_SIGNING_KEYS: JSON.stringify({ keys: [await generateSigningJwk('EdDSA', 'sustain-1')] }),
  SLUICE_ALLOW_PRIVATE_TARGETS: 'true',
  SLUICE_RETENTION: values.retention,
  // Retention never keeps less than a lease can last: a minute here, so the window is the one asked.
  SLUICE_MAX_LEASE_MS: '60000',
  ...(consumers ? { SLUICE_QUEUES: JSON.stringify({ sustain: { pull: true } }) } : {}),
};
let base: string;
let stopServer: () => Promise<void>;
/** The Node server's pid, for its memory (the Worker runs inside workerd: not sampled). */
let serverPid: number | null = null;
let cron: ReturnType<typeof setInterval> | null = null;
if (values.worker) {
  const proxy = await startWsProxy({ host: '127.0.0.1', port: postgres.port });
  const worker = await startWorker({ script: await bundleWorker(), vars: { ...env, SLUICE_NEON_WS_PROXY: proxy.address } });
  base = worker.url;
  // Cloudflare fires the cron every minute; here the harness does.
  cron = setInterval(() => void worker.scheduled().catch((e) => console.error('cron failed', e)), 60_000);
  stopServer = async () => {
    await worker.close();
    await proxy.close();
  };
} else {
  const port = await freePort();
  const server: ChildProcess = await spawnReady(
    `${BIN}/node`,
    ['src/node/serve.ts'],
    { ...env, PORT: String(port) },
    'sluice: listening on',
  );
  base = `http://127.0.0.1:${port}`;
  serverPid = server.pid ?? null;
  stopServer = async () => {
    const exited = new Promise((r) => server.once('exit', r));
    server.kill('SIGTERM');
    await exited;
  };
}

// The producer: batch k is due at k × batch / rate seconds from the start.
const started = performance.now();
let enqueued = 0;
let failures = 0;
const producing = true;
const producer = (async () => {
  const inFlight = new Set<Promise<void>>();
  for (let k = 0; producing; k++) {
    const due = started + (k * batch * 1000) / rate;
    if (due > started + durationMs) break;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const first = k * batch;
    const tasks = Array.from({ length: batch }, (_, i) => ({
      ...(consumers ? {} : { url: target }),
      queue: 'sustain',
      body: { n: first + i },
      ...(keys ? { concurrency_key: `k${(first + i) % keys}`, concurrency_limit: KEY_LIMIT } : {}),
      ...(dedupTtlMs ? { dedup_key: `order-${first + i}`, dedup_ttl_ms: dedupTtlMs } : {}),
      ...(values.features
        ? {
            traceparent: `00-${(first + i).toString(16).padStart(32, '0').replace(/^0/, '1')}-00f067aa0ba902b7-01`,
            ...((first + i) % 10 === 0 ? { callback_url: target.replace('/noop', '/callback') } : {}),
          }
        : {}),
    }));
    const call = fetch(`${base}/v1/tasks/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ tasks }),
    })
      .then(async (res) => {
        await res.arrayBuffer();
        if (res.status !== 201) throw new Error(`enqueue answered ${res.status}`);
        const at = performance.now();
        for (let i = 0; i < batch; i++) returnedAt.set(first + i, at);
        enqueued += batch;
      })
      .catch(() => {
        failures++;
      });
    const tracked = call.finally(() => inFlight.delete(tracked));
    inFlight.add(tracked);
  }
  await Promise.all(inFlight);
})();

// With --pull: the consumers, each a loop of long polls, every task completed with its lease.
let consuming = true;
let pullFailures = 0;
let completeFailures = 0;
const consumed = Array.from({ length: consumers }, async () => {
  while (consuming) {
    try {
      const res = await fetch(`${base}/v1/queues/sustain/lease`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ max: 50, wait_ms: 1_000 }),
      });
      if (res.status !== 200) throw new Error(`pull answered ${res.status}`);
      const { tasks } = (await res.json()) as { tasks: Array<{ body: { n: number }; lease: { id: string; token: string } }> };
      for (const t of tasks) arrived(t.body.n);
      await Promise.all(
        tasks.map(async (t) => {
          const done = await fetch(`${base}/v1/leases/${t.lease.id}/complete`, {
            method: 'POST',
            headers: { authorization: `Bearer ${t.lease.token}`, 'content-type': 'application/json' },
            body: '{}',
          });
          await done.arrayBuffer();
          // One not completed would be pulled again and counted twice: it counts as a failure.
          if (!done.ok) completeFailures++;
        }),
      );
    } catch {
      pullFailures++;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
});

// Samples.
interface Sample {
  minute: number;
  pushedPerS: number;
  p50: number;
  p99: number;
  hot: number;
  retained: number;
  /** Rows of sluice.lanes: a key's lane goes once no unfinished task is in it (the sweep). */
  lanes: number;
  bytes: number;
  walPerTask: number;
  /** The server's resident memory, MB (Node only). */
  rssMb: number | null;
}

/** A process's resident set, MB, from /proc (null where there is none). */
async function rssMb(pid: number | null): Promise<number | null> {
  if (pid === null) return null;
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kb = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
  return kb === undefined ? null : Number(kb) / 1024;
}
const samples: Sample[] = [];
const lsn = async () => (await db.query<{ l: string }>('select pg_current_wal_lsn()::text as l')).rows[0]!.l;
let lastLsn = await lsn();
let lastPushed = 0;
let lastAt = performance.now();
const quantile = (xs: number[], q: number) => {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
console.log(
  `bench:sustain — ${path}, ${rate} tasks/s in batches of ${batch} for ${values.minutes} min, SLUICE_RETENTION=${values.retention}`,
);
console.log('| min | pushed/s | p50 ms | p99 ms | hot rows | retained rows | lane rows | table bytes | WAL B/task | server RSS MB |');
console.log('|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|');
async function sample(): Promise<void> {
  const now = performance.now();
  const [counts] = (
    await db.query<{ hot: number; retained: number; lanes: number; bytes: string }>(
      `select (select count(*) from sluice.tasks)::int as hot, (select count(*) from sluice.finished)::int as retained,
              (select count(*) from sluice.lanes)::int as lanes,
              (select sum(pg_total_relation_size(c.oid)) from pg_class c join pg_namespace n on n.oid = c.relnamespace
               where n.nspname = 'sluice' and c.relkind in ('r', 'p', 'm'))::text as bytes`,
    )
  ).rows;
  const l = await lsn();
  const [wal] = (await db.query<{ b: number }>('select pg_wal_lsn_diff($1, $2)::float8 as b', [l, lastLsn])).rows;
  const n = pushed - lastPushed;
  const window = arrivals;
  arrivals = [];
  const s: Sample = {
    minute: Math.round((now - started) / 6_000) / 10,
    pushedPerS: n / ((now - lastAt) / 1000),
    p50: quantile(window, 0.5),
    p99: quantile(window, 0.99),
    hot: counts!.hot,
    retained: counts!.retained,
    lanes: counts!.lanes,
    bytes: Number(counts!.bytes),
    walPerTask: n > 0 ? wal!.b / n : 0,
    rssMb: await rssMb(serverPid),
  };
  samples.push(s);
  lastLsn = l;
  lastPushed = pushed;
  lastAt = now;
  console.log(
    `| ${s.minute} | ${fmt(s.pushedPerS)} | ${s.p50.toFixed(1)} | ${s.p99.toFixed(1)} | ${fmt(s.hot)} | ${fmt(s.retained)} | ${fmt(s.lanes)} | ${fmt(s.bytes)} | ${fmt(s.walPerTask)} | ${s.rssMb === null ? '-' : s.rssMb.toFixed(0)} |`,
  );
}
const sampler = setInterval(() => void sample().catch((e) => console.error('sample failed', e)), sampleMs);
await producer;
// Let the last pushes land, then one last sample.
const drainUntil = performance.now() + 30_000;
while (pushed < enqueued && performance.now() < drainUntil) await new Promise((r) => setTimeout(r, 100));
clearInterval(sampler);
// The pushes since the last sample, if any landed after it.
if (pushed > lastPushed) await sample();
consuming = false;
await Promise.all(consumed);
if (cron) clearInterval(cron);

// The verdict. Retention drops a bucket at a time, so rows and bytes saw up and down between
// samples: a trend line through a few of them is noise. What must not happen is growth: the
// second half's peak above the first half's (after a 3-minute warm-up) by more than 10%. Retained
// rows saw between a window's and the designed bound, a window and an eighth plus a sweep (at
// most another eighth): a second half that reaches the bound the first half missed is not
// growth. A minute's p99 jumps at each checkpoint (every 5 minutes): latency is compared by the
// median minute's p99, which a sustained rise moves and one checkpoint's minute does not.
const minutes = Number(values.minutes);
const firstHalf = samples.filter((s) => s.minute > Math.min(3, minutes / 4) && s.minute <= minutes / 2);
const secondHalf = samples.filter((s) => s.minute > minutes / 2);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)] ?? 0;
/** The second half's figure over the first half's (`of`: peak, else as given), less 1; below a floor (a second's tasks, 10 ms) counts as the floor. */
function growth(pick: (s: Sample) => number, floor = 0, of: (xs: number[]) => number = (xs) => Math.max(...xs)): number {
  if (firstHalf.length === 0 || secondHalf.length === 0) return 0;
  const figure = (xs: Sample[]) => Math.max(floor, of(xs.map(pick)));
  return figure(secondHalf) / figure(firstHalf) - 1;
}
const retentionMs = parseRetention(String(values.retention)) ?? 0;
const retainedBound = (rate * retentionMs * 1.25) / 1000;
const trends = {
  hot: growth((s) => s.hot, rate),
  retained: growth((s) => s.retained, Math.max(rate, retainedBound)),
  lanes: growth((s) => s.lanes, rate),
  bytes: growth((s) => s.bytes),
  p99: growth((s) => s.p99, 10, median),
  ...(serverPid === null ? {} : { rss: growth((s) => s.rssMb ?? 0) }),
};
const keptUp = enqueued > 0 && pushed >= enqueued * 0.99 && failures === 0 && pullFailures === 0 && completeFailures === 0;
const steady = keptUp && Object.values(trends).every((t) => t <= 0.1);
const after3 = samples.filter((s) => s.minute > 3);
console.log(
  `\nenqueued ${fmt(enqueued)} (${failures} failed batches${consumers ? `, ${pullFailures} failed pulls, ${completeFailures} failed completes` : ''}), pushed ${fmt(pushed)}; most rows retained after minute 3: ${fmt(Math.max(0, ...after3.map((s) => s.retained)))}`,
);
console.log(
  `second half against the first: peak hot rows ${(trends.hot * 100).toFixed(1)}%, peak retained ${(trends.retained * 100).toFixed(1)}% (of at least the bound, ${fmt(retainedBound)}), peak lane rows ${(trends.lanes * 100).toFixed(1)}%, peak bytes ${(trends.bytes * 100).toFixed(1)}%, median minute's p99 ${(trends.p99 * 100).toFixed(1)}%${'rss' in trends ? `, peak server RSS ${((trends.rss ?? 0) * 100).toFixed(1)}%` : ''}`,
);
if (values.features) console.log(`callbacks received: ${callbacks} of ${Math.ceil(enqueued / 10)} tasks that named one`);
console.log(`verdict: ${steady ? 'STEADY' : 'NOT STEADY'}${keptUp ? '' : ' (did not keep up with the rate)'}`);

await stopServer();
await new Promise<void>((r) => endpoint.close(() => r()));
await db.end();
await admin.end();
await postgres.stop();
await rm(dir, { recursive: true, force: true });
process.exit(steady ? 0 : 1);
