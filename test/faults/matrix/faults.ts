/**
 * The faults of the matrix on the Node path, one per run. Each says how the endpoint handles
 * pushes, how the Sluice processes are started, and how the fault is injected: it returns the
 * fault's window (what the checker explains duplicates by and measures recovery from), or
 * `null` for a condition that holds the whole run and must cause no duplicate at all.
 */
import pg from 'pg';
import type { Behaviour, FaultWindow, PushRecord } from './checker.ts';
import type { Cluster, Database, SluiceProcess } from './cluster.ts';
import { type FaultEndpoint, wallNow } from './endpoint.ts';

export const LEASE_MS = 3_000;
export const PUSH_TIMEOUT_MS = 1_000;
/** How long a window-long fault lasts. */
const FAULT_MS = 5_000;

export interface FaultContext {
  cluster: Cluster;
  endpoint: FaultEndpoint;
  db: Database;
  log(line: string): void;
}

export interface Injected {
  window: FaultWindow | null;
  note?: string;
  /** Ends what the fault left running, once the run has drained; what it saw, and what was wrong. */
  release?: () => Promise<{ note?: string; problem?: string }>;
}

export interface Fault {
  name: string;
  title: string;
  /** Environment of the Sluice processes. */
  env?: Record<string, string>;
  /** Fields of every task. */
  task?: Record<string, unknown>;
  /** How the endpoint handles a push; `faulty()` is true while the fault's window is open. */
  behave?: (push: PushRecord, faulty: () => boolean) => Behaviour;
  /** Needs a Postgres the harness can restart. */
  restartsPostgres?: boolean;
  inject(ctx: FaultContext, open: (on: boolean) => void): Promise<Injected>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const OK: Behaviour = { kind: 'ok', ms: 5 };
const LEASE: Behaviour = { kind: 'lease', ms: 20, heartbeatMs: 1_000 };
/** A stable draw per task and attempt, so a script picks the same pushes on every run. */
const draw = (p: PushRecord) => ((Number(p.taskId) * 2_654_435_761 + p.attempt * 40_503) % 1_000) / 1_000;

/** Runs `fn` over a window of FAULT_MS: opens the endpoint's fault, then closes it. */
async function windowOf(open: (on: boolean) => void, during: () => Promise<void> = () => sleep(FAULT_MS)): Promise<FaultWindow> {
  const startMs = wallNow();
  open(true);
  await during();
  open(false);
  return { startMs, endMs: wallNow() };
}

/** Replaces a killed process after a second, as a supervisor would. */
function replace(ctx: FaultContext, env: Record<string, string> | undefined): void {
  void sleep(1_000)
    .then(() => ctx.cluster.start(env))
    .catch((error: unknown) => ctx.log(`  the replacement did not start: ${(error as Error).message}`));
}

/**
 * Kills one of the cluster's live processes at a moment `check` finds at least `want` of what
 * it looks for in it (after 100 tries, or half its time, one will do). It freezes a process
 * (SIGSTOP) and checks; enough, and the process is killed, else thawed and tried again. It
 * gives up in 90 s, inside the test's 120 s, so that a failure says what the endpoint saw.
 *
 * The victim is whichever process holds the work, never a fixed one: while the cluster limit
 * binds, a slot freed by a push's end is claimed again by the process whose push it was,
 * before any other hears of it, so one process can hold every slot while the other sleeps
 * until the next lease expiry, with nothing for a freeze to catch (`npm test` under load
 * failed that way: the process chosen beforehand held no push for the whole drain).
 *
 * With `unfrozen`, each try first waits, without freezing, until `check` would find enough in
 * some process now, and freezes that one; else each try freezes the next process in turn.
 */
async function killWhen(
  cluster: Cluster,
  what: string,
  check: (p: SluiceProcess) => Promise<string[]>,
  options: { want?: number; unfrozen?: boolean; explain?: () => string } = {},
): Promise<{ at: number; found: string[] }> {
  const { want = 1, unfrozen = false, explain = () => '' } = options;
  const start = Date.now();
  const deadline = start + 90_000;
  // The unfrozen wait counts no tries: without the clock, work no process ever holds `want` of
  // at once would be waited for until the test's own timeout, which says nothing.
  const enough = (tries: number) => (tries < 100 && Date.now() < start + 45_000 ? want : 1);
  const live = () => cluster.processes.filter((p) => p.child.exitCode === null && p.child.signalCode === null);
  for (let tries = 0; tries < 200 && Date.now() < deadline; tries++) {
    let p: SluiceProcess | undefined;
    if (unfrozen) {
      while (!p && Date.now() < deadline) {
        for (const candidate of live()) if ((await check(candidate)).length >= enough(tries)) p = candidate;
        if (!p) await sleep(5);
      }
    } else {
      const all = live();
      p = all[tries % Math.max(1, all.length)];
    }
    if (!p) break;
    p.child.kill('SIGSTOP');
    const found = await check(p);
    if (found.length >= enough(tries)) {
      const at = wallNow();
      p.child.kill('SIGKILL');
      return { at, found };
    }
    p.child.kill('SIGCONT');
    await sleep(unfrozen ? 5 : 20 + Math.random() * 100);
  }
  throw new Error(`no stop landed ${what} in 200 tries or 90 s${explain()}`);
}

/**
 * Terminates the backends running statements like `pattern`, up to `times` times, a while
 * apart; at least once (a run that drains meanwhile leaves nothing more to catch).
 */
async function terminate(ctx: FaultContext, pattern: string, times: number, what: string): Promise<Injected> {
  const client = new pg.Client({ connectionString: ctx.db.url, application_name: 'sluice-faults' });
  await client.connect();
  let startMs = 0;
  let hits = 0;
  const until = Date.now() + 60_000;
  try {
    while (hits < times && Date.now() < until && (hits === 0 || wallNow() - startMs < 10_000)) {
      const { rows } = await client.query(
        // This database's only: in npm test, other files' databases share the server.
        `select count(*) filter (where pg_terminate_backend(pid))::int as n from pg_stat_activity
         where datname = current_database() and state = 'active' and query like $1 and pid <> pg_backend_pid()`,
        [pattern],
      );
      if (rows[0].n > 0) {
        startMs ||= wallNow();
        hits++;
        await sleep(300);
      }
    }
  } finally {
    await client.end();
  }
  if (hits === 0) throw new Error(`no ${what} caught running in 60 s`);
  return { window: { startMs, endMs: wallNow() }, note: `${hits} ${what}${hits === 1 ? '' : 's'} terminated while running` };
}

/** Restarts Postgres as a crash would (both paths). */
export async function restartPostgres(db: Database): Promise<Injected> {
  const startMs = wallNow();
  await db.restart!();
  const endMs = wallNow();
  return { window: { startMs, endMs }, note: `down ${((endMs - startMs) / 1000).toFixed(1)} s` };
}

async function leasedNow(ctx: FaultContext): Promise<Map<string, string>> {
  const { rows } = await ctx.cluster.admin.query<{ lease_id: string; id: string }>(
    `select lease_id::text, id::text from sluice.all_tasks where status = 'leased'`,
  );
  return new Map(rows.map((r) => [r.lease_id, r.id]));
}

export const FAULTS: Fault[] = [
  {
    name: 'none',
    title: 'no fault (control)',
    async inject() {
      return { window: null };
    },
  },
  {
    name: 'kill-after-claim',
    title: 'dispatcher killed (kill -9) between claim and push',
    async inject(ctx) {
      // Frozen, a process's claims stay unpushed: a lease in the database that stays unseen by
      // the endpoint while the other process pushes on was claimed by the frozen one and not pushed.
      const { at, found } = await killWhen(ctx.cluster, 'between a claim and its push', async () => {
        await sleep(100);
        const first = await leasedNow(ctx);
        await sleep(250);
        const second = await leasedNow(ctx);
        return [...first].filter(([lease]) => second.has(lease) && !ctx.endpoint.seenLeases.has(lease)).map(([, task]) => task);
      });
      replace(ctx, undefined);
      return {
        window: { startMs: at, endMs: at, affected: found },
        note: `killed holding ${found.length} claimed, unpushed leases`,
        // Those tasks were claimed by the killed process and never pushed: their first push is
        // attempt 2, after the lease expired (a task the other process pushed is attempt 1).
        async release() {
          const first = (id: string) => ctx.endpoint.pushes.find((p) => p.taskId === id)?.attempt ?? 0;
          const retried = found.filter((id) => first(id) >= 2).length;
          const note = `${retried} of them first pushed as attempt 2, after the lease expired`;
          return retried === 0 ? { note, problem: 'no claimed, unpushed lease was caught' } : { note };
        },
      };
    },
  },
  {
    name: 'kill-mid-push',
    title: 'dispatcher killed (kill -9) mid-push',
    // While the kill is tried, pushes take 400 ms (still within the timeout), so a stop finds
    // some in flight: at 5 ms each a freeze could miss them all until the drain ended.
    behave: (_push, faulty) => (faulty() ? { kind: 'ok', ms: 400 } : OK),
    async inject(ctx, open) {
      open(true);
      // Frozen, a process reads no answer: its pushes that had arrived and were not yet
      // answered are cut.
      const { at, found } = await killWhen(
        ctx.cluster,
        'with a push in flight',
        async (p) => {
          const stoppedAt = wallNow();
          const mine = await p.portsTo(ctx.endpoint.port);
          return [...ctx.endpoint.portsOpenAt(stoppedAt)].filter((port) => mine.has(port)).map(String);
        },
        {
          want: 3,
          unfrozen: true,
          explain: () =>
            `: at the end the endpoint had ${ctx.endpoint.portsOpenAt(wallNow()).size} pushes open, ` +
            `${ctx.cluster.processes.filter((p) => p.child.exitCode === null && p.child.signalCode === null).length} processes running`,
        },
      ).finally(() => open(false));
      replace(ctx, undefined);
      return {
        window: { startMs: at, endMs: at },
        note: `killed with ${found.length} of its pushes in flight at the endpoint (unanswered)`,
      };
    },
  },
  {
    name: 'terminate-claim',
    title: 'database connections terminated mid-claim (pg_terminate_backend)',
    async inject(ctx) {
      return terminate(ctx, 'select % from sluice.claim(%', 5, 'claim');
    },
  },
  {
    name: 'terminate-settle',
    title: 'database connections terminated mid-settle (pg_terminate_backend)',
    async inject(ctx) {
      return terminate(ctx, '%jsonb_to_recordset($1::jsonb) as s(%', 5, 'settle');
    },
  },
  {
    name: 'postgres-restart',
    title: 'Postgres restarted (crash: immediate shutdown, recovery)',
    restartsPostgres: true,
    inject: (ctx) => restartPostgres(ctx.db),
  },
  {
    name: 'network-drop',
    title: 'network cut between Sluice and Postgres: connections reset, new ones refused, 5 s',
    async inject(ctx, open) {
      let cut = 0;
      const window = await windowOf(open, async () => {
        cut = ctx.cluster.proxy.drop();
        await sleep(FAULT_MS);
        ctx.cluster.proxy.heal();
      });
      return { window, note: `${cut} connections reset` };
    },
  },
  {
    name: 'network-stall',
    title: 'network stalled between Sluice and Postgres: no byte moves, 5 s',
    async inject(ctx, open) {
      const window = await windowOf(open, async () => {
        ctx.cluster.proxy.stall();
        await sleep(FAULT_MS);
        ctx.cluster.proxy.heal();
      });
      return { window };
    },
  },
  {
    name: 'endpoint-hang',
    title: 'endpoint hangs past the push timeout (and the lease) on 5% of pushes, 5 s',
    behave: (p, faulty) => (faulty() && draw(p) < 0.05 ? { kind: 'hang', ms: LEASE_MS + 1_000 } : OK),
    async inject(_, open) {
      return { window: await windowOf(open) };
    },
  },
  {
    name: 'heartbeat-stop',
    title: 'lease holders stop heartbeating (10% of pushes, 5 s), then call late',
    behave: (p, faulty) => {
      if (faulty() && draw(p) < 0.1) return { kind: 'abandon' };
      // 1% work past the lease, kept alive by heartbeats.
      return draw(p) > 0.99 ? { kind: 'lease', ms: LEASE_MS + 1_000, heartbeatMs: LEASE_MS / 3 } : LEASE;
    },
    async inject(_, open) {
      return { window: await windowOf(open) };
    },
  },
  {
    name: 'lease-calls',
    title: 'duplicate, concurrent and late lease calls (30% of pushes, 5 s)',
    behave: (p, faulty) => (faulty() && draw(p) < 0.3 ? { kind: 'chaos', ms: 20 } : LEASE),
    async inject(_, open) {
      return { window: await windowOf(open) };
    },
  },
  {
    name: 'held-xmin',
    title: 'a long transaction holds back vacuum (the whole run)',
    async inject(ctx) {
      const client = new pg.Client({ connectionString: ctx.db.url, application_name: 'sluice-faults-xmin' });
      await client.connect();
      await client.query('begin isolation level repeatable read');
      await client.query('select count(*) from sluice.all_tasks');
      return {
        window: null,
        async release() {
          const dead = await ctx.cluster.admin.query<{ n: string }>(
            `select n_dead_tup::text as n from pg_stat_user_tables where schemaname = 'sluice' and relname = 'tasks'`,
          );
          await client.query('rollback');
          await client.end();
          return { note: `${dead.rows[0]?.n ?? '?'} dead task tuples held at the end` };
        },
      };
    },
  },
  {
    name: 'pool-exhaustion',
    title: "Postgres's connection slots exhausted by idle clients and Sluice's connections reset, 5 s",
    async inject(ctx, open) {
      const hogs: pg.Client[] = [];
      const window = await windowOf(open, async () => {
        for (;;) {
          const c = new pg.Client({ connectionString: ctx.db.url, application_name: 'hog' });
          c.on('error', () => {});
          try {
            await c.connect();
            hogs.push(c);
          } catch {
            break;
          }
        }
        // Make Sluice reconnect: every backend but the hogs and the harness's own.
        await hogs[0]!.query(
          `select pg_terminate_backend(pid) from pg_stat_activity
           where datname = current_database() and application_name not in ('hog', 'sluice-faults') and pid <> pg_backend_pid()`,
        );
        await sleep(FAULT_MS);
        await Promise.all(hogs.map((c) => c.end().catch(() => {})));
      });
      return { window, note: `${hogs.length} idle connections held every free slot` };
    },
  },
  clockFault('db-clock-ahead', "the database's clock 30 s ahead of Sluice's", -30_000),
  clockFault('db-clock-behind', "the database's clock 30 s behind Sluice's", 30_000),
];

/**
 * Sluice's processes run with their wall clock shifted (skewed-clock.ts) while Postgres keeps
 * the machine's: a relative skew, which is all that can matter, since leases, due times and
 * expiries are the database's. 5% of first pushes fail (500), so retries and their backoff
 * (500 ms, no jitter) run across the skew too.
 */
function clockFault(name: string, title: string, appSkewMs: number): Fault {
  return {
    name,
    title,
    env: { SLUICE_FAULT_CLOCK_SKEW_MS: String(appSkewMs) },
    task: { backoff: { initial_ms: 500, max_ms: 500, factor: 1, jitter: 0 } },
    behave: (p) => (p.attempt === 1 && draw(p) < 0.05 ? { kind: 'fail', ms: 20 } : OK),
    async inject(ctx) {
      return {
        window: null,
        async release() {
          // A retry must wait its backoff on the database's clock: neither skipped nor stretched.
          const gaps: number[] = [];
          const byTask = new Map<string, PushRecord[]>();
          for (const p of ctx.endpoint.pushes) byTask.set(p.taskId, [...(byTask.get(p.taskId) ?? []), p]);
          for (const pushes of byTask.values()) {
            pushes.sort((a, b) => a.receivedAt - b.receivedAt);
            for (let i = 1; i < pushes.length; i++) gaps.push(pushes[i]!.receivedAt - pushes[i - 1]!.endedAt!);
          }
          if (gaps.length === 0) return { problem: 'no retry was made' };
          gaps.sort((a, b) => a - b);
          const [min, median] = [Math.round(gaps[0]!), Math.round(gaps[Math.floor(gaps.length / 2)]!)];
          const note = `${gaps.length} retries after a 500 ms backoff: shortest wait ${min} ms, median ${median} ms`;
          // A retry waits its backoff, then its turn in its lane: never less than the backoff
          // (skipped: the skew made it due at once), never the skew's 30 s more (stretched).
          return min < 450 || min > 10_000 ? { note, problem: `the shortest retry waited ${min} ms` } : { note };
        },
      };
    },
  };
}
