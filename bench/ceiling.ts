import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pg from 'pg';
import type { LeasedTask } from '../src/core/types.ts';
import { taskClaimBatch } from '../src/db/claim.ts';
import type { OpenDb } from '../src/db/db.ts';
import { taskInsertMany } from '../src/db/enqueue.ts';
import { leaseEnding, leaseSettleMany } from '../src/db/settle.ts';
import { migrateDatabase } from '../src/node/migrations.ts';
import { openPgDb } from '../src/node/pg-db.ts';
import { startEmbeddedPostgres } from '../src/node/postgres.ts';
import { newTask } from '../test/helpers/tasks.ts';
import { measureWindow, type Window } from './ceiling-window.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '2.5' },
    parts: { type: 'string', default: 'claim,claim-fsync,commit' },
  },
});
const MEASURE_MS = Number(values.seconds) * 1000;
if (!(MEASURE_MS > 0)) throw new Error('--seconds: a positive number');
const PARTS = new Set(values.parts.split(','));
const WARM_MS = 300;
/** Cells during which other processes used more cores than this are marked. */
const OTHER_NOTED = 0.2;
/** Large enough never to bind: each database of a sharded cluster would claim under a budget. */
const CLUSTER_CAP = 1_000_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const fmt = (x: number, digits = 0) =>
  Number.isFinite(x) ? x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : '—';
const log = (text: string) => process.stderr.write(`${text}\n`);

let postmasterPid = 0;
/** A measured window of `workers` loops of `step` (bench/ceiling-window.ts), with this run's timing. */
const measure = (workers: number, step: (worker: number, window: Window) => Promise<number | null>, onOpen?: () => Promise<void>) =>
  measureWindow({ warmMs: WARM_MS, measureMs: MEASURE_MS, postmasterPid: () => postmasterPid }, workers, step, onOpen);

/** A cell is measured again (at most twice more, within the first 150 s) while other processes took more than OTHER_NOTED cores. */
const STARTED = performance.now();
async function cleanest<T>(run: () => Promise<T>, other: (t: T) => number): Promise<T> {
  let best = await run();
  for (let i = 0; i < 2 && other(best) > OTHER_NOTED && performance.now() - STARTED < 150_000; i++) {
    log('  (others were busy: again)');
    const next = await run();
    if (other(next) < other(best)) best = next;
  }
  return best;
}

// --- the server ---------------------------------------------------------------------------
const dir = await mkdtemp(join(tmpdir(), 'sluice-ceiling-'));
// fsync is not on the command line, so that ALTER SYSTEM can turn it on and off between parts.
// pg_stat_statements with track = all also times the statements inside the claim function.
const postgres = await startEmbeddedPostgres({
  dir,
  persistent: false,
  settings: { shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track': 'all' },
});
const admin = new pg.Pool({ connectionString: postgres.url('postgres'), max: 2 });
admin.on('error', () => {});
postmasterPid = Number((await readFile(join(postgres.dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);

async function setFsync(on: boolean): Promise<void> {
  await admin.query(`alter system set fsync = ${on ? 'on' : 'off'}`);
  await admin.query('select pg_reload_conf()');
  // Every new connection reads the reloaded file; wait until one does.
  for (let i = 0; i < 100; i++) {
    const client = new pg.Client({ connectionString: postgres.url('postgres') });
    await client.connect();
    const { rows } = await client.query<{ fsync: string }>('show fsync');
    await client.end();
    if (rows[0]?.fsync === (on ? 'on' : 'off')) return;
    await sleep(50);
  }
  throw new Error('fsync did not change');
}

try {
  const [version] = (await admin.query<{ v: string }>("select current_setting('server_version') as v")).rows as [{ v: string }];
  await admin.query('create database ceiling');
  const url = postgres.url('ceiling');
  await migrateDatabase(url);
  const setup = openPgDb(url, 2);
  await setup.query('create extension if not exists pg_stat_statements');

  // --- 1. the claim ---------------------------------------------------------------------
  interface ClaimRow {
    fsync: boolean;
    /** Leases held in another queue all along. */
    held: number;
    claimers: number;
    max: number;
    passesPerS: number;
    tasksPerS: number;
    perPass: number;
    /** One claim pass as its caller waits for it, ms. */
    claimMs: number;
    /** Per pass, from pg_stat_statements: waiting for the lock, and executing once it is held. */
    waitMs: number;
    holdMs: number;
    drained: boolean;
    /** Cores other processes used meanwhile. */
    other: number;
  }
  const claimRows: ClaimRow[] = [];
  const claimOnce = async (fsync: boolean, claimers: number, max: number, held: number): Promise<ClaimRow> => {
    // The same start for every cell: empty tables, a pool of pending tasks in one lane, vacuumed.
    await setup.query('truncate sluice.tasks, sluice.attempts, sluice.finished, sluice.rate_grants');
    if (held > 0) {
      // Long leases in another queue, taken before the pool is enqueued: they stay leased throughout.
      await taskInsertMany(
        setup,
        Array.from({ length: held }, () => newTask({ queue: 'held', url: 'http://127.0.0.1:1/noop', leaseMs: 3_600_000 })),
      );
      while ((await taskClaimBatch(setup, { max: 1_000, clusterCap: CLUSTER_CAP, queuesJson: '{}' })).length > 0);
    }
    const pending = max === 100 ? 60_000 : 20_000;
    for (let i = 0; i < pending; i += 2_000) {
      await taskInsertMany(
        setup,
        Array.from({ length: 2_000 }, (_, j) =>
          newTask({ queue: 'ceiling', url: 'http://127.0.0.1:1/noop', body: JSON.stringify({ n: i + j }) }),
        ),
      );
    }
    await setup.query('vacuum analyze sluice.tasks');
    await setup.query('vacuum analyze sluice.lanes');
    await admin.query('checkpoint');
    const dbs: OpenDb[] = Array.from({ length: claimers }, () => openPgDb(url, 1));
    let claims = 0;
    let claimMs = 0;
    const r = await measure(
      claimers,
      async (w, window) => {
        const db = dbs[w]!;
        const began = performance.now();
        const counted = window.open;
        const batch: LeasedTask[] = await taskClaimBatch(db, { max, clusterCap: CLUSTER_CAP, queuesJson: '{}' });
        if (counted && window.open) {
          claims++;
          claimMs += performance.now() - began;
        }
        if (batch.length === 0) return null;
        // As a push's end would: the lease ends in one statement, outside the lock.
        await leaseSettleMany(
          db,
          batch.map((t) => leaseEnding(t, { status: 'succeeded', result: null, httpStatus: 200 }, 0)),
        );
        return batch.length;
      },
      async () => {
        await setup.query('select pg_stat_statements_reset()');
      },
    );
    // The claim's call, and the lock statement inside it (the only one in this database that takes it).
    const stats = await setup.query<{ claim_calls: number; claim_ms: number; lock_calls: number; lock_ms: number }>(
      `select coalesce(sum(calls) filter (where query like 'select % from sluice.claim(%'), 0)::float8 as claim_calls,
              coalesce(sum(total_exec_time) filter (where query like 'select % from sluice.claim(%'), 0)::float8 as claim_ms,
              coalesce(sum(calls) filter (where query ilike '%sluice.claim_lock()%' and toplevel = false), 0)::float8 as lock_calls,
              coalesce(sum(total_exec_time) filter (where query ilike '%sluice.claim_lock()%' and toplevel = false), 0)::float8 as lock_ms
       from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())`,
    );
    await Promise.all(dbs.map((db) => db.close()));
    const s = stats[0]!;
    const waitMs = s.lock_calls > 0 ? s.lock_ms / s.lock_calls : Number.NaN;
    const row: ClaimRow = {
      fsync,
      held,
      claimers,
      max,
      passesPerS: (r.ops / r.ms) * 1000,
      tasksPerS: (r.items / r.ms) * 1000,
      perPass: r.ops > 0 ? r.items / r.ops : 0,
      claimMs: claims > 0 ? claimMs / claims : 0,
      waitMs,
      holdMs: s.claim_calls > 0 ? s.claim_ms / s.claim_calls - waitMs : Number.NaN,
      drained: r.drained,
      other: r.otherCores,
    };
    log(
      `claim fsync ${fsync ? 'on' : 'off'}, ${held} held, c=${claimers}, m=${max}: ${fmt(row.passesPerS)} passes/s, ${fmt(row.tasksPerS)} tasks/s, ` +
        `wait ${fmt(waitMs, 2)} ms, held ${fmt(row.holdMs, 2)} ms a pass, others used ${fmt(row.other, 2)} cores${r.drained ? ' (ran out of tasks)' : ''}`,
    );
    return row;
  };
  const claimCell = async (fsync: boolean, claimers: number, max: number, held = 0): Promise<void> => {
    claimRows.push(
      await cleanest(
        () => claimOnce(fsync, claimers, max, held),
        (row) => row.other,
      ),
    );
  };

  if (PARTS.has('claim')) {
    await setFsync(false);
    for (const max of [1, 10, 100]) for (const claimers of [1, 2, 4, 8]) await claimCell(false, claimers, max);
    for (const claimers of [1, 4]) await claimCell(false, claimers, 100, 10_000);
  }
  if (PARTS.has('claim-fsync')) {
    await setFsync(true);
    for (const max of [10, 100]) for (const claimers of [1, 4]) await claimCell(true, claimers, max);
  }

  // --- 2. and 3. small write transactions ---------------------------------------------------
  interface RateRow {
    fsync: boolean;
    what: string;
    connections: number;
    commitsPerS: number;
    tasksPerS: number | null;
    latencyMs: number;
    other: number;
  }
  const rateRows: RateRow[] = [];
  const rateRow = (fsync: boolean, what: string, connections: number, r: Window, tasks: boolean) => {
    const row: RateRow = {
      fsync,
      what,
      connections,
      commitsPerS: (r.ops / r.ms) * 1000,
      tasksPerS: tasks ? (r.items / r.ms) * 1000 : null,
      latencyMs: r.latencyMs,
      other: r.otherCores,
    };
    rateRows.push(row);
    log(
      `${what}, fsync ${fsync ? 'on' : 'off'}, ${connections} connections: ${fmt(row.commitsPerS)} commits/s, others used ${fmt(row.other, 2)} cores`,
    );
  };
  await setup.query('create table if not exists public.ceiling_commit (id integer primary key, n bigint not null default 0)');
  await setup.query('insert into public.ceiling_commit (id) select g from generate_series(0, 15) g on conflict do nothing');
  const commitCell = async (fsync: boolean, connections: number) => {
    const clients = Array.from({ length: connections }, () => new pg.Client({ connectionString: url }));
    await Promise.all(clients.map((c) => c.connect()));
    // Each connection its own row: no row lock is waited for, only the commit.
    const r = await cleanest(
      () =>
        measure(connections, async (w) => {
          await clients[w]!.query({ name: 'bump', text: 'update public.ceiling_commit set n = n + 1 where id = $1', values: [w] });
          return 1;
        }),
      (w) => w.otherCores,
    );
    await Promise.all(clients.map((c) => c.end()));
    rateRow(fsync, 'one-row update', connections, r, false);
  };
  const enqueueCell = async (fsync: boolean, connections: number, keys: number, perCommit: number) => {
    const dbs: OpenDb[] = Array.from({ length: connections }, () => openPgDb(url, 1));
    const counts = new Array<number>(connections).fill(0);
    const r = await cleanest(
      () =>
        measure(connections, async (w) => {
          const tasks = Array.from({ length: perCommit }, () => {
            const n = counts[w]!++;
            return newTask({
              queue: 'enqueue',
              url: 'http://127.0.0.1:1/noop',
              concurrencyKey: keys > 1 ? `k${(w * 7 + n) % keys}` : null,
            });
          });
          await taskInsertMany(dbs[w]!, tasks);
          return perCommit;
        }),
      (w) => w.otherCores,
    );
    await Promise.all(dbs.map((db) => db.close()));
    rateRow(
      fsync,
      `enqueue ${perCommit === 1 ? 'one task' : `${perCommit} tasks`}, ${keys > 1 ? `${keys} keys` : 'one lane'}`,
      connections,
      r,
      true,
    );
  };

  for (const fsync of PARTS.has('commit') ? [false, true] : []) {
    await setFsync(fsync);
    await admin.query('checkpoint');
    for (const connections of [1, 2, 4, 8, 16]) await commitCell(fsync, connections);
    await setup.query('truncate sluice.tasks');
    for (const keys of [1, 100]) for (const connections of [1, 4, 16]) await enqueueCell(fsync, connections, keys, 1);
    for (const connections of [1, 4]) await enqueueCell(fsync, connections, 1, 100);
  }
  await setup.close();

  // --- the report -------------------------------------------------------------------------
  const cpu = cpus();
  console.log(
    `\n${new Date().toISOString().slice(0, 10)}: ${cpu.length} cores (${cpu[0]?.model.trim() ?? 'unknown'}), Node ${process.versions.node}, ` +
      `PostgreSQL ${version.v} embedded (default settings, pg_stat_statements on, fsync as shown); the load from one Node process ` +
      `on the same cores. Each cell: ${WARM_MS} ms warm-up, then ${fmt(MEASURE_MS / 1000, 1)} s.\n`,
  );
  if (claimRows.length > 0) {
    console.log('### The claim: passes through its advisory lock (each claimer: claim, then settle the batch; one lane)\n');
    console.log(
      '| fsync | other leases | claimers | max | passes/s | tasks/s | tasks/pass | claim call, ms | lock wait, ms | lock held (before commit), ms | lock busy | other processes, cores |',
    );
    console.log('|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|');
    for (const r of claimRows) {
      console.log(
        `| ${r.fsync ? 'on' : 'off'} | ${fmt(r.held)} | ${r.claimers} | ${r.max} | ${fmt(r.passesPerS)} | ${fmt(r.tasksPerS)} | ${fmt(r.perPass, 1)} | ` +
          `${fmt(r.claimMs, 2)} | ${fmt(r.waitMs, 2)} | ${fmt(r.holdMs, 2)} | ${fmt((r.holdMs * r.passesPerS) / 10)}% | ${fmt(r.other, 2)} |${r.drained ? ' ran out of tasks' : ''}`,
      );
    }
  }
  if (rateRows.length > 0) {
    // One row per kind of transaction and fsync, one column per number of connections.
    const columns = [...new Set(rateRows.map((r) => r.connections))].sort((x, y) => x - y);
    const kinds = [...new Set(rateRows.map((r) => `${r.fsync ? 'on' : 'off'}|${r.what}`))];
    console.log('\n### Small write transactions: commits/s (one-row updates), tasks/s (enqueues)\n');
    console.log(`| fsync | transaction | ${columns.map((c) => `${c} conn.`).join(' | ')} |`);
    console.log(`|---|---|${columns.map(() => '--:').join('|')}|`);
    for (const kind of kinds) {
      const [fsync, what] = kind.split('|') as [string, string];
      const cells = columns.map((c) => {
        const r = rateRows.find((x) => `${x.fsync ? 'on' : 'off'}|${x.what}` === kind && x.connections === c);
        return r ? `${fmt(r.tasksPerS ?? r.commitsPerS)}${r.other > OTHER_NOTED ? '*' : ''}` : '';
      });
      console.log(`| ${fsync} | ${what} | ${cells.join(' | ')} |`);
    }
    if (rateRows.some((r) => r.other > OTHER_NOTED)) console.log(`\n\\* other processes used more than ${OTHER_NOTED} cores meanwhile.`);
  }
} finally {
  await admin.end();
  await postgres.stop();
  await rm(dir, { recursive: true, force: true });
}
