/**
 * `npm run bench:dispatch`: due-time dispatch measured, on the real Worker (workerd, the
 * scheduler and pusher Durable Objects) and on the Node server, against one embedded Postgres
 * and a local endpoint. Prints figures; asserts nothing but the limits, which must hold.
 *
 * 1. Wake-up latency, each case ROUNDS times on both paths: a task enqueued while nothing runs
 *    (from the enqueue's answer to its push), a retry after a 200 ms backoff
 *    (gap from the first push), a task delayed 2 s (late after its run_at), a 429 with
 *    Retry-After: 1 (gap), a lease abandoned by its holder (lease 1 s; gap from the first push),
 *    and the slot a lease `complete` frees handed to the next task (from sending the call).
 * 2. Fan-out on the Worker: 2,000 tasks to an endpoint that answers after 200 ms, with
 *    SLUICE_DISPATCH_SHARDS 1 and 8, under a cluster cap, a queue limit and key limits that
 *    the endpoint checks on every push; then 2,000 no-op tasks with 8 shards (BENCH_NOOP_SHARDS:
 *    a comma-separated list of shard counts to run it with instead). BENCH_PARTS=noop (or latency,
 *    fanout) runs only those parts.
 */
import { createServer } from 'node:http';
import pg from 'pg';
import { startNodeSluice } from '../src/node/server.ts';
import { startWorker } from '../src/node/worker-runtime.ts';
import { benchSetup } from './setup.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const FANOUT_TASKS = Number(process.env.BENCH_TASKS ?? 2_000);
/** Shard counts the no-op fan-out runs with, one run each (`BENCH_NOOP_SHARDS=4,8,16`). */
const NOOP_SHARDS = (process.env.BENCH_NOOP_SHARDS ?? '8').split(',');
/** Which parts to run (`BENCH_PARTS=noop`): latency, fanout, noop; default all. */
const PARTS = (process.env.BENCH_PARTS ?? 'latency,fanout,noop').split(',');
const LIMITS = { cluster: 45, queue: 30, key: 4, keys: 10 };

// --- the endpoint: behaviour by path, limits checked on every push --------------------------
interface Push {
  at: number;
  taskId: string;
  attempt: string;
  leaseExpiresAt: number;
}
const seen = new Map<string, Push[]>();
const open = { cluster: 0, queue: 0, key: new Map<string, number>() };
const peak = { cluster: 0, queue: 0, key: 0 };
/** Leases kept by `/hold` pushes, by task id. */
const held = new Map<string, { leaseId: string; token: string }>();
const endpoint = createServer((req, res) => {
  const taskId = String(req.headers['sluice-task-id']);
  const pushes = seen.get(taskId) ?? [];
  pushes.push({
    at: Date.now(),
    taskId,
    attempt: String(req.headers['sluice-attempt']),
    leaseExpiresAt: Date.parse(String(req.headers['sluice-lease-expires-at'])),
  });
  seen.set(taskId, pushes);
  const first = pushes.length === 1;
  const path = req.url ?? '';
  req.resume();
  if (path.startsWith('/fail-once') && first) return res.writeHead(500).end();
  if (path.startsWith('/429-once') && first) return res.writeHead(429, { 'retry-after': '1' }).end();
  if (path.startsWith('/abandon-once') && first) return res.writeHead(202, { 'sluice-ack': 'lease' }).end();
  if (path.startsWith('/hold')) {
    held.set(taskId, { leaseId: String(req.headers['sluice-lease-id']), token: String(req.headers['sluice-lease-token']) });
    return res.writeHead(202, { 'sluice-ack': 'lease' }).end();
  }
  if (!path.startsWith('/slow')) {
    return res.writeHead(200).end();
  }
  const queue = String(req.headers['sluice-queue']);
  const key = String(req.headers['sluice-concurrency-key'] ?? '');
  open.cluster++;
  peak.cluster = Math.max(peak.cluster, open.cluster);
  if (queue === 'limited') {
    open.queue++;
    peak.queue = Math.max(peak.queue, open.queue);
    open.key.set(key, (open.key.get(key) ?? 0) + 1);
    peak.key = Math.max(peak.key, open.key.get(key) ?? 0);
  }
  setTimeout(() => {
    open.cluster--;
    if (queue === 'limited') {
      open.queue--;
      open.key.set(key, (open.key.get(key) ?? 0) - 1);
    }
    res.writeHead(200).end();
  }, 200);
});
endpoint.keepAliveTimeout = 1;
await new Promise<void>((r) => endpoint.listen(0, '127.0.0.1', r));
const target = `http://127.0.0.1:${(endpoint.address() as { port: number }).port}`;

// --- Postgres, secrets ---------------------------------------------------------------------
const setup = await benchSetup();
const { databaseUrl, script } = setup;
const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
db.on('error', () => {});
const baseEnv = {
  ...setup.env,
  SLUICE_CLUSTER_CAP: String(LIMITS.cluster),
  SLUICE_QUEUES: JSON.stringify({ limited: { concurrency: LIMITS.queue, key_concurrency: LIMITS.key }, single: { concurrency: 1 } }),
};

async function post(base: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Record<string, unknown>> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { ...headers, authorization: `Bearer ${setup.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (res.status !== 201) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, unknown>;
}

async function pushesOf(taskId: string, n: number, timeoutMs = 30_000): Promise<Push[]> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const pushes = seen.get(taskId) ?? [];
    if (pushes.length >= n) return pushes;
    await new Promise((r) => setTimeout(r, 2));
  }
  throw new Error(`task ${taskId}: ${seen.get(taskId)?.length ?? 0} of ${n} pushes in ${timeoutMs} ms`);
}

const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return `p50 ${s[Math.floor((s.length - 1) / 2)]} ms, max ${s.at(-1)} ms (n=${s.length})`;
};

// --- 1. wake-up latency ----------------------------------------------------------------------
async function latency(base: string): Promise<Record<string, string>> {
  const cases: Record<string, number[]> = { enqueue: [], retry: [], delay: [], deferral: [], reclaim: [], handoff: [] };
  for (let round = 0; round < ROUNDS; round++) {
    // A task enqueued while nothing runs: from the enqueue's answer to its push.
    await new Promise((r) => setTimeout(r, 100));
    const single = await post(base, '/v1/tasks', { url: `${target}/ok` });
    const answered = Date.now();
    const [s1] = await pushesOf(String(single.id), 1);
    cases.enqueue!.push(s1!.at - answered);

    const retry = await post(base, '/v1/tasks', {
      url: `${target}/fail-once`,
      backoff: { initial_ms: 200, max_ms: 200, factor: 1, jitter: 0 },
    });
    const [r1, r2] = await pushesOf(String(retry.id), 2);
    cases.retry!.push(r2!.at - r1!.at);

    const delayed = await post(base, '/v1/tasks', { url: `${target}/ok`, delay_ms: 2_000 });
    const [d1] = await pushesOf(String(delayed.id), 1);
    cases.delay!.push(d1!.at - Date.parse(String(delayed.run_at)));

    const deferred = await post(base, '/v1/tasks', { url: `${target}/429-once` });
    const [q1, q2] = await pushesOf(String(deferred.id), 2);
    if (q2!.attempt !== '1') throw new Error('a Retry-After deferral used an attempt');
    cases.deferral!.push(q2!.at - q1!.at);

    const abandoned = await post(base, '/v1/tasks', { url: `${target}/abandon-once`, lease_ms: 1_000, timeout_ms: 500 });
    const [a1, a2] = await pushesOf(String(abandoned.id), 2);
    cases.reclaim!.push(a2!.at - a1!.at);

    // Queue "single" has concurrency 1: the second task waits for the first's lease to end.
    const holder = await post(base, '/v1/tasks', { url: `${target}/hold`, queue: 'single' });
    await pushesOf(String(holder.id), 1);
    const waiter = await post(base, '/v1/tasks', { url: `${target}/ok`, queue: 'single' });
    const lease = held.get(String(holder.id))!;
    const completing = Date.now();
    const done = await fetch(`${base}/v1/leases/${lease.leaseId}/complete`, {
      method: 'POST',
      headers: { authorization: `Bearer ${lease.token}`, 'content-type': 'application/json' },
      body: '{}',
    });
    if (done.status !== 200) throw new Error(`complete: ${done.status}`);
    const [w1] = await pushesOf(String(waiter.id), 1);
    cases.handoff!.push(w1!.at - completing);
  }
  return {
    'task enqueued while idle (from the answer to the push)': stats(cases.enqueue!),
    'retry after a 200 ms backoff (from the first push)': stats(cases.retry!),
    'task delayed 2 s (late after run_at)': stats(cases.delay!),
    '429 with Retry-After: 1 (from the first push)': stats(cases.deferral!),
    'abandoned 1 s lease (from the first push)': stats(cases.reclaim!),
    'slot handed on by a lease complete (from sending it)': stats(cases.handoff!),
  };
}

// --- 2. fan-out -------------------------------------------------------------------------------
async function fanout(base: string, path: '/slow' | '/ok', tasks: number): Promise<number> {
  const started = Date.now();
  const all = Array.from({ length: tasks }, (_, i) =>
    i % 2 === 0
      ? { url: `${target}${path}`, queue: 'limited', concurrency_key: `k${i % LIMITS.keys}` }
      : { url: `${target}${path}`, queue: 'open' },
  );
  // The bulk path a user enqueueing thousands takes: ids back, not whole tasks.
  for (let i = 0; i < all.length; i += 1_000)
    await post(base, '/v1/tasks/batch', { tasks: all.slice(i, i + 1_000) }, { prefer: 'return=minimal' });
  for (;;) {
    const [row] = (await db.query(`select count(*)::int as n from sluice.finished where status = 'succeeded'`)).rows as Array<{
      n: number;
    }>;
    if (row!.n >= tasks) break;
    if (Date.now() - started > 600_000) throw new Error(`fan-out: ${row!.n} of ${tasks} after 10 minutes`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return tasks / ((Date.now() - started) / 1_000);
}

const reset = () =>
  db.query('truncate sluice.tasks, sluice.finished, sluice.attempts, sluice.lanes, sluice.queues, sluice.key_limits cascade');

const report: string[] = [];
const say = (line: string) => {
  report.push(line);
  console.log(line);
};

try {
  say(`# due-time dispatch, ${new Date().toISOString()}`);
  for (const [name, start] of PARTS.includes('latency')
    ? ([
        ['Worker (workerd, npm start)', () => startWorker({ script, vars: { ...baseEnv, SLUICE_DISPATCH_SHARDS: '4' } })],
        ['Node (npm run serve)', () => startNodeSluice({ env: baseEnv })],
      ] as const)
    : []) {
    await reset();
    const app = await start();
    try {
      say(`\n## ${name}: wake-up latency`);
      for (const [what, figure] of Object.entries(await latency(app.url))) say(`- ${what}: ${figure}`);
    } finally {
      await app.close();
    }
  }

  if (PARTS.includes('fanout')) await fanoutPart();
  if (PARTS.includes('noop')) await noopPart();
} finally {
  await db.end();
  endpoint.closeAllConnections();
  endpoint.close();
  await setup.close();
}

async function fanoutPart() {
  say(`\n## Worker fan-out: ${FANOUT_TASKS} tasks, endpoint answers after 200 ms`);
  say(`limits: cluster ${LIMITS.cluster}, queue "limited" ${LIMITS.queue}, ${LIMITS.keys} keys × ${LIMITS.key}; parallelism 6 per shard`);
  const rates: Record<string, number> = {};
  for (const shards of ['1', '8']) {
    await reset();
    Object.assign(peak, { cluster: 0, queue: 0, key: 0 });
    const worker = await startWorker({ script, vars: { ...baseEnv, SLUICE_DISPATCH_SHARDS: shards, SLUICE_DISPATCH_PARALLELISM: '6' } });
    try {
      rates[shards] = await fanout(worker.url, '/slow', FANOUT_TASKS);
    } finally {
      await worker.close();
    }
    say(
      `- SLUICE_DISPATCH_SHARDS=${shards}: ${rates[shards]!.toFixed(1)} tasks/s; endpoint peaks: cluster ${peak.cluster}/${LIMITS.cluster}, ` +
        `queue ${peak.queue}/${LIMITS.queue}, key ${peak.key}/${LIMITS.key}`,
    );
    if (peak.cluster > LIMITS.cluster || peak.queue > LIMITS.queue || peak.key > LIMITS.key)
      throw new Error('a limit was exceeded at the endpoint');
  }
  say(`- ratio 8 shards / 1 shard: ${(rates['8']! / rates['1']!).toFixed(2)}×`);
}

async function noopPart() {
  for (const shards of NOOP_SHARDS) {
    await reset();
    const worker = await startWorker({ script, vars: { ...baseEnv, SLUICE_DISPATCH_SHARDS: shards, SLUICE_CLUSTER_CAP: '' } });
    try {
      const rate = await fanout(worker.url, '/ok', FANOUT_TASKS);
      say(`- ${FANOUT_TASKS} no-op tasks, ${shards} shards × 6, no cluster cap: ${rate.toFixed(0)} tasks/s`);
    } finally {
      await worker.close();
    }
  }
}
