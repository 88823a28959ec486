/**
 * One run of the fault matrix: a fresh task table, two Sluice processes, the producer
 * enqueueing items across three queues whose cluster, queue and key limits all bind, the fault
 * injected once a third of the items are done, then a drain and the total-queue check.
 */
import type pg from 'pg';
import { checkHistory, type LevelLimits, type Verdict } from './checker.ts';
import { type Database, startCluster } from './cluster.ts';
import type { FaultEndpoint } from './endpoint.ts';
import { type Fault, type Injected, LEASE_MS, PUSH_TIMEOUT_MS } from './faults.ts';
import { produce } from './producer.ts';

/** Cluster 32; alpha: 10, 3 per key over 5 keys; beta: 1 per key over 12 keys; gamma: none (fills the cluster's rest). */
export const LIMITS: LevelLimits = {
  cluster: 32,
  queues: { alpha: { concurrency: 10, key_concurrency: 3 }, beta: { key_concurrency: 1 }, gamma: {} },
};

export interface RunSetup {
  db: Database;
  endpoint: FaultEndpoint;
  /** Sluice's environment (secrets, webhook secret); the run adds limits, lease and timeout. */
  env: Record<string, string>;
  apiKey: string;
  log: (line: string) => void;
  /** Tells the endpoint where to send its lease calls. */
  setSluiceUrl: (url: () => string) => void;
}

export interface RunResult {
  fault: Pick<Fault, 'name' | 'title'>;
  verdict: Verdict;
  notes: string[];
  durationMs: number;
  /** Items per second from the first enqueue to the drain. */
  throughput: number;
}

/** Item i's queue and key: a third to each queue, keys in turn. */
export function taskFor(url: string, extra: Record<string, unknown> = {}) {
  return (i: number): Record<string, unknown> => {
    const n = Math.floor(i / 3);
    const placed =
      i % 3 === 0
        ? { queue: 'alpha', concurrency_key: `a${n % 5}` }
        : i % 3 === 1
          ? { queue: 'beta', concurrency_key: `b${n % 12}` }
          : { queue: 'gamma' };
    return { url: `${url}/work`, ...placed, max_attempts: 25, backoff: { initial_ms: 100, max_ms: 1_000 }, ...extra };
  };
}

export async function runFault(fault: Fault, setup: RunSetup, items: number): Promise<RunResult> {
  if (fault.restartsPostgres && !setup.db.restart) throw new Error(`${fault.name} restarts Postgres: run it on the matrix's own`);
  const cluster = await startCluster(setup.db, {
    ...setup.env,
    SLUICE_CLUSTER_CAP: String(LIMITS.cluster),
    SLUICE_QUEUES: JSON.stringify(LIMITS.queues),
    SLUICE_LEASE_MS: String(LEASE_MS),
    SLUICE_PUSH_TIMEOUT_MS: String(PUSH_TIMEOUT_MS),
    ...fault.env,
  });
  try {
    const result = await drive({
      setup,
      items,
      fault,
      admin: cluster.admin,
      anyUrl: () => cluster.anyUrl(),
      start: async () => {
        await Promise.all([cluster.start(fault.env), cluster.start(fault.env)]);
      },
      inject: (open) => fault.inject({ cluster, endpoint: setup.endpoint, db: setup.db, log: setup.log }, open),
    });
    return { ...result, fault };
  } finally {
    await cluster.close();
  }
}

/** What a run drives, on either path. */
export interface Drive {
  setup: RunSetup;
  items: number;
  fault: Pick<Fault, 'name' | 'task' | 'behave'>;
  admin: pg.Pool;
  /** A Sluice URL that is up now. */
  anyUrl: () => string;
  start: () => Promise<void>;
  inject: (open: (on: boolean) => void) => Promise<Injected>;
  /** Injects once this is true (default: a third of the items done). */
  ready?: (done: number, produced: boolean) => boolean;
}

/** Produces, injects the fault when ready, drains, and checks. */
export async function drive(d: Drive): Promise<Omit<RunResult, 'fault'>> {
  const { endpoint, log } = d.setup;
  const notes: string[] = [];
  const problems: string[] = [];
  let faulty = false;
  let release: Injected['release'];
  try {
    await d.admin.query(
      'truncate sluice.tasks, sluice.finished, sluice.attempts, sluice.lanes, sluice.levels, sluice.queues, sluice.key_limits cascade',
    );
    endpoint.reset();
    const script = d.fault.behave;
    if (script) endpoint.behave((p) => script(p, () => faulty));
    d.setup.setSluiceUrl(d.anyUrl);
    await d.start();

    const started = Date.now();
    let producing = true;
    const producer = produce({
      items: d.items,
      batch: 250,
      intervalMs: 120,
      apiKey: d.setup.apiKey,
      url: d.anyUrl,
      task: taskFor(endpoint.url, d.fault.task),
    });
    void producer.done.finally(() => {
      producing = false;
    });
    const ready = d.ready ?? ((done) => done >= d.items / 3);
    await until('the moment to inject', () => ready(endpoint.doneCount(), !producing), 300_000);
    log(`  ${d.fault.name}: injecting at ${endpoint.doneCount()} done`);
    const injected = await d.inject((on) => {
      faulty = on;
    });
    if (injected.note) notes.push(injected.note);
    release = injected.release;
    const produced = await producer.done;
    await until(`${d.items} items drained`, () => drained(d.admin, d.items), 300_000);
    await endpoint.settled();
    const durationMs = Date.now() - started;
    if (release) {
      const { note, problem } = await release();
      release = undefined;
      if (note) notes.push(note);
      if (problem) problems.push(problem);
    }
    const history = await collect(d.admin, endpoint);
    const verdict = checkHistory({ ...history, acked: produced.acked, resent: produced.resent, fault: injected.window, limits: LIMITS });
    if (produced.bad.length > 0) problems.push(`enqueue answered ${[...new Set(produced.bad)].join(', ')}`);
    if (produced.refusals.without > 0) problems.push(`${produced.refusals.without} refusals without Retry-After`);
    if (produced.refusals.withRetryAfter > 0)
      notes.push(`${produced.refusals.withRetryAfter} enqueues refused with 503 + Retry-After, then resent`);
    if (produced.resent.size > 0) notes.push(`${produced.resent.size} items resent with their dedup_key`);
    if (verdict.enqueueDuplicates > 0)
      notes.push(`${verdict.enqueueDuplicates} items enqueued twice (an answer lost, the first task already done)`);
    verdict.problems.push(...problems);
    verdict.ok = verdict.problems.length === 0;
    return { verdict, notes, durationMs, throughput: d.items / (durationMs / 1_000) };
  } finally {
    await release?.().catch(() => {});
  }
}

export async function drained(admin: pg.Pool, items: number): Promise<boolean> {
  const { rows } = await admin.query<{ done: number; open: number }>(
    `select count(distinct (body::jsonb ->> 'item')) filter (where status = 'succeeded')::int as done,
            count(*) filter (where status in ('pending', 'leased'))::int as open
     from sluice.all_tasks`,
  );
  return rows[0]!.done >= items && rows[0]!.open === 0;
}

/** The history the checker reads: the database at rest and the endpoint's log. */
export async function collect(admin: pg.Pool, endpoint: FaultEndpoint) {
  const tasks = await admin.query<{ id: string; item: number; status: string }>(
    `select id::text, (body::jsonb ->> 'item')::int as item, status from sluice.all_tasks`,
  );
  const leased = await admin.query<{ n: number }>(`select count(*)::int as n from sluice.all_tasks where status = 'leased'`);
  const abandoned = endpoint.pushes.filter((p) => p.behaviour === 'abandon').map((p) => p.leaseId);
  const attempts = await admin.query<{ leaseId: string; outcome: string }>(
    `select lease_id::text as "leaseId", outcome from sluice.all_attempts where lease_id = any($1::uuid[])`,
    [abandoned],
  );
  return {
    tasks: tasks.rows,
    leasedAtRest: leased.rows[0]!.n,
    pushes: endpoint.pushes,
    calls: endpoint.calls,
    abandonedAttempts: attempts.rows,
  };
}

export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
