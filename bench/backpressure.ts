/**
 * `npm run bench:backpressure`: how fast an adaptive queue learns what its endpoint takes, on
 * the Node server and on the Worker (workerd), against one embedded Postgres.
 *
 * The endpoint takes at most C pushes at once, each lasting 100 ms, and answers 429 without
 * Retry-After above C; C is 8 for the first 10 s, then 24. Its capacity is C / 100 ms.
 * 1. One queue, concurrency 64, adaptive, 8,000 tasks (BENCH_TASKS).
 * 2. A keyed queue, key_concurrency 64, adaptive, 4 keys; the endpoint takes C at once per key
 *    but only 2 for the key "slow": each key should learn its own.
 * Per second: pushes answered 200 and 429. Reported: the 429 share after the first 5 s, the
 * throughput against capacity in seconds 5-10, how long after C rose it took to reach 80% of
 * the new capacity, tasks dead and attempts used by a 429 (both should be 0), claim passes.
 * BENCH_TRACE=1 also prints each level's learnt limit and leases four times a second (ten in the
 * ramp), and the time Postgres spent in Sluice's functions.
 *
 * BENCH_MODE=ramp is the ramp as a user meets it: one queue (concurrency 64, adaptive) on the
 * paths' defaults (the Worker as `npm start` runs it, 4 shards of 6; Node with 64 in flight),
 * keyless, then with every task under one key (key_concurrency 64). Reported: pushes answered
 * 200 per second, seconds 5-10 against 80/s, and seconds 10-20 (the ramp included) against 240/s.
 */
import { createServer } from 'node:http';
import pg from 'pg';
import { startNodeSluice } from '../src/node/server.ts';
import { startWorker } from '../src/node/worker-runtime.ts';
import { benchSetup } from './setup.ts';

const RAMP = process.env.BENCH_MODE === 'ramp';
/** Enough for the ramp's 20 s at full capacity (800 + 2,400) and some left over. */
const TASKS = Number(process.env.BENCH_TASKS ?? (RAMP ? 4_000 : 8_000));
/** Which paths to run: `node`, `worker` or both (default), comma-separated. */
const PATHS = (process.env.BENCH_PATHS ?? 'node,worker').split(',');
const PUSH_MS = 100;
const PHASE_MS = 10_000;

// --- the endpoint ---------------------------------------------------------------------------
let capacity = { all: 8, slow: 2 };
let keyed = false;
const inFlight = new Map<string, number>();
let seconds: Array<{ ok: number; over: number }> = [];
let startedAt = 0;
const tick = () => {
  const s = Math.floor((Date.now() - startedAt) / 1000);
  while (seconds.length <= s) seconds.push({ ok: 0, over: 0 });
  return seconds[s]!;
};
const endpoint = createServer((req, res) => {
  req.resume();
  const key = keyed ? decodeURIComponent(String(req.headers['sluice-concurrency-key'] ?? '')) : '*';
  const cap = key === 'slow' ? capacity.slow : capacity.all;
  const n = inFlight.get(key) ?? 0;
  if (n >= cap) {
    tick().over++;
    res.writeHead(429).end('slow down');
    return;
  }
  inFlight.set(key, n + 1);
  setTimeout(() => {
    inFlight.set(key, (inFlight.get(key) ?? 1) - 1);
    tick().ok++;
    res.writeHead(200).end();
  }, PUSH_MS);
});
await new Promise<void>((r) => endpoint.listen(0, '127.0.0.1', r));
const endpointUrl = `http://127.0.0.1:${(endpoint.address() as { port: number }).port}`;

const setup = await benchSetup();
const admin = new pg.Pool({ connectionString: setup.databaseUrl, max: 2 });
// Postgres stops under its idle connections at the end: that is no failure of the bench.
admin.on('error', () => {});

async function enqueue(url: string, queue: string, keyOf: (n: number) => string | null) {
  for (let start = 0; start < TASKS; start += 500) {
    const tasks = Array.from({ length: Math.min(500, TASKS - start) }, (_, i) => {
      const key = keyOf(start + i);
      return { queue, url: `${endpointUrl}/${queue}`, body: { n: start + i }, ...(key === null ? {} : { concurrency_key: key }) };
    });
    const res = await fetch(`${url}/v1/tasks/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${setup.apiKey}`, 'content-type': 'application/json', prefer: 'return=minimal' },
      body: JSON.stringify({ tasks }),
    });
    if (res.status !== 201) throw new Error(`enqueue answered ${res.status}: ${await res.text()}`);
  }
}

/** Claim passes so far, as the dispatchers metered them (written a few times a second). */
async function claimPasses(): Promise<number> {
  const [row] = (
    await admin.query<{ n: number }>(`select coalesce(sum(value), 0)::int as n from sluice.counters where metric = 'claim_passes'`)
  ).rows;
  return row!.n;
}

async function run(path: string, url: string, queue: string, keyOf: (n: number) => string | null) {
  // The server's chores may hold these tables: a truncate that deadlocks with one is tried again.
  for (let tries = 1; ; tries++) {
    try {
      await admin.query('truncate sluice.tasks, sluice.finished, sluice.attempts, sluice.lanes, sluice.levels cascade');
      break;
    } catch (error) {
      if ((error as { code?: string }).code !== '40P01' || tries === 5) throw error;
    }
  }
  capacity = { all: 8, slow: 2 };
  keyed = queue !== 'flat';
  inFlight.clear();
  seconds = [];
  const passesBefore = await claimPasses();
  startedAt = Date.now();
  const raise = setTimeout(() => {
    capacity = { all: 24, slow: 2 };
  }, PHASE_MS);
  await enqueue(url, queue, keyOf);
  const deadline = Date.now() + 300_000;
  for (;;) {
    const [row] = (await admin.query<{ n: number }>('select count(*)::int as n from sluice.tasks where queue = $1', [queue])).rows;
    if (row!.n === 0 || Date.now() > deadline) break;
    if (process.env.BENCH_TRACE) {
      const lv = (
        await admin.query<{ s: string }>(
          `select string_agg(l.lane || '=' || coalesce(v.effective::text, '-') || '/' || l.n, ' ' order by l.lane) as s
           from (select lane, count(*) filter (where status = 'leased')::int as n from sluice.tasks where queue = $1 group by lane) l
           left join sluice.levels v on v.queue = $1 and v.lane = (case when $1 = 'flat' then '*' else l.lane end)`,
          [queue],
        )
      ).rows[0]!.s;
      console.log(
        `  t=${((Date.now() - startedAt) / 1000).toFixed(1)} learnt/leased ${lv}; endpoint ${[...inFlight].map(([k, n]) => `${k}:${n}`).join(' ')}`,
      );
    }
    await new Promise((r) => setTimeout(r, RAMP ? 100 : 250));
  }
  clearTimeout(raise);
  const took = (Date.now() - startedAt) / 1000;
  const passes = (await claimPasses()) - passesBefore;
  if (process.env.BENCH_TRACE) {
    // Since the database was made (bench/setup.ts tracks functions when BENCH_TRACE is set).
    const { rows } = await admin.query<{ line: string }>(
      `select funcname || ': ' || calls || ' calls, ' || round((total_time / nullif(calls, 0))::numeric, 3) || ' ms each' as line
       from pg_stat_user_functions order by total_time desc limit 4`,
    );
    console.log(`  functions so far: ${rows.map((r) => r.line).join('; ')}`);
  }
  const outcome = (
    await admin.query<{ dead: number; extra: number; learnt: string }>(
      `select (select count(*)::int from sluice.all_tasks where queue = $1 and status <> 'succeeded') as dead,
              (select count(*)::int from sluice.all_tasks where queue = $1 and attempts > 1) as extra,
              (select string_agg(lane || '=' || effective, ' ' order by lane) from sluice.levels where queue = $1) as learnt`,
      [queue],
    )
  ).rows[0]!;
  const share = (from: number, to: number) => {
    const s = seconds.slice(from, to);
    const over = s.reduce((a, x) => a + x.over, 0);
    const all = over + s.reduce((a, x) => a + x.ok, 0);
    return all === 0 ? 0 : over / all;
  };
  const rate = (from: number, to: number) => seconds.slice(from, to).reduce((a, x) => a + x.ok, 0) / Math.max(1, to - from);
  // Capacity per second: C / 100 ms (per key with four keys: the "slow" key's 2 plus C for each other).
  const cap = (c: number) => (queue === 'keyed' ? (c * 3 + 2) * (1000 / PUSH_MS) : c * (1000 / PUSH_MS));
  const firstPhase = PHASE_MS / 1000;
  if (RAMP) {
    const after = rate(firstPhase, 2 * firstPhase);
    console.log(
      [
        `${path} ${queue}:`,
        `s 5-10 ${rate(5, firstPhase).toFixed(0)}/s of ${cap(8)} (${((rate(5, firstPhase) / cap(8)) * 100).toFixed(0)}%);`,
        `s 10-20 ${after.toFixed(0)}/s of ${cap(24)} (${((after / cap(24)) * 100).toFixed(0)}%);`,
        `429 share s 10-20 ${(share(firstPhase, 2 * firstPhase) * 100).toFixed(1)}%;`,
        `not succeeded ${outcome.dead}; learnt ${outcome.learnt}; ${passes} claim passes`,
      ].join(' '),
    );
    console.log(`  per second (200/429): ${seconds.map((s) => `${s.ok}/${s.over}`).join(' ')}`);
    return;
  }
  const reached = seconds.findIndex((s, i) => i >= firstPhase && s.ok >= 0.8 * cap(24));
  const line = [
    `${path} ${queue}:`,
    `${TASKS} tasks in ${took.toFixed(1)} s;`,
    `429 share after 5 s ${(share(5, seconds.length) * 100).toFixed(1)}%;`,
    `s 5-10 ${rate(5, firstPhase).toFixed(0)}/s of ${cap(8)} (${((rate(5, firstPhase) / cap(8)) * 100).toFixed(0)}%);`,
    `after C rose: 80% of ${cap(24)}/s ${reached < 0 ? 'not reached' : `in ${reached - firstPhase + 1} s`};`,
    `s 12-17 ${rate(firstPhase + 2, firstPhase + 7).toFixed(0)}/s (${((rate(firstPhase + 2, firstPhase + 7) / cap(24)) * 100).toFixed(0)}%);`,
    `not succeeded ${outcome.dead}, attempts > 1: ${outcome.extra}; learnt ${outcome.learnt};`,
    `${passes} claim passes (${(TASKS / Math.max(1, passes)).toFixed(1)} tasks a pass)`,
  ].join(' ');
  console.log(line);
  console.log(`  per second (200/429): ${seconds.map((s) => `${s.ok}/${s.over}`).join(' ')}`);
}

const queues = JSON.stringify({
  flat: { concurrency: 64, adaptive: true },
  keyed: { key_concurrency: 64, adaptive: true },
  one_key: { key_concurrency: 64, adaptive: true },
});
/** The ramp runs each path on its defaults; the first workload, 16 shards of 6 and Node 100 in flight. */
const env = { ...setup.env, SLUICE_QUEUES: queues, SLUICE_CLUSTER_CAP: '', ...(RAMP ? {} : { SLUICE_DISPATCH_PARALLELISM: '100' }) };
const keyOf = (n: number) => (n % 4 === 0 ? 'slow' : `k${n % 4}`);
/** The queues a path runs, in order: keyless, then keyed. */
const runs: Array<[string, (n: number) => string | null]> = RAMP
  ? [
      ['flat', () => null],
      ['one_key', () => 'k'],
    ]
  : [
      ['flat', () => null],
      ['keyed', keyOf],
    ];
try {
  if (PATHS.includes('node')) {
    const node = await startNodeSluice({ env });
    try {
      for (const [queue, key] of runs) await run('Node', node.url, queue, key);
    } finally {
      await node.close();
    }
  }
  if (PATHS.includes('worker')) {
    const vars = RAMP ? env : { ...env, SLUICE_DISPATCH_SHARDS: '16', SLUICE_DISPATCH_PARALLELISM: '6' };
    const worker = await startWorker({ script: setup.script, vars });
    try {
      for (const [queue, key] of runs) await run('Worker', worker.url, queue, key);
    } finally {
      await worker.close();
    }
  }
} finally {
  await admin.end();
  await setup.close();
  endpoint.close();
}
