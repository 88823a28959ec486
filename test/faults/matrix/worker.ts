/**
 * The Worker path under faults: the real Worker in workerd (Miniflare), its scheduler and
 * pusher Durable Objects, the Neon driver reaching Postgres through the local stand-in for
 * Neon's proxy, the same producer, endpoint, limits and checker as the Node path. The harness
 * fires the cron every 10 s (production: every minute), as `npm start` does.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../../../src/node/postgres.ts';
import { bundleWorker, type RunningWorker, startWorker } from '../../../src/node/worker-runtime.ts';
import { type RunningProxy, startWsProxy } from '../../../src/node/ws-proxy.ts';
import type { Database } from './cluster.ts';
import { wallNow } from './endpoint.ts';
import { type Injected, LEASE_MS, PUSH_TIMEOUT_MS, restartPostgres } from './faults.ts';
import { drive, LIMITS, type RunResult, type RunSetup } from './scenario.ts';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.ts';

export const CRON_MS = 10_000;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export interface WorkerContext {
  db: Database;
  admin: pg.Pool;
  proxy: RunningProxy;
  /** The network between Neon's stand-in and Postgres. */
  network: TcpProxy;
  /** Stops workerd at once (whatever its invocations were doing) and starts it again; `wipe` loses the Durable Objects' storage. */
  restart(wipe: boolean): Promise<void>;
  /** Resolves when no push has arrived for `quietMs`: the shards are idle. */
  quiet(quietMs: number): Promise<void>;
}

export interface WorkerFault {
  name: string;
  title: string;
  task?: Record<string, unknown>;
  restartsPostgres?: boolean;
  /** Injects once this is true (default: a third of the items done). */
  ready?: (done: number, produced: boolean) => boolean;
  inject(ctx: WorkerContext): Promise<Injected>;
}

export const WORKER_FAULTS: WorkerFault[] = [
  {
    name: 'worker-proxy-cut',
    title: 'the proxy drops every Postgres connection mid-drain, 3 times 0.5 s apart',
    async inject(ctx) {
      const startMs = wallNow();
      let cut = 0;
      for (let i = 0; i < 3; i++) {
        cut += ctx.proxy.cut();
        await sleep(500);
      }
      return { window: { startMs, endMs: wallNow() }, note: `${cut} connections cut` };
    },
  },
  {
    name: 'worker-network-stall',
    title: "the network between Neon's proxy and Postgres stalled mid-drain: no byte moves, 5 s",
    async inject(ctx) {
      const startMs = wallNow();
      ctx.network.stall();
      await sleep(5_000);
      ctx.network.heal();
      return { window: { startMs, endMs: wallNow() } };
    },
  },
  {
    name: 'worker-postgres-restart',
    title: 'Postgres restarted mid-drain (crash: immediate shutdown, recovery)',
    restartsPostgres: true,
    inject: (ctx) => restartPostgres(ctx.db),
  },
  {
    name: 'worker-restart',
    title: 'workerd killed mid-push and restarted (Durable Object storage kept)',
    async inject(ctx) {
      const startMs = wallNow();
      await ctx.restart(false);
      return { window: { startMs, endMs: wallNow() } };
    },
  },
  {
    name: 'worker-lost-alarm',
    title: "the scheduler's alarm lost while tasks wait to come due (storage wiped); the cron recovers",
    // Every task due 3 s after its enqueue: once the producer is done and the shards idle,
    // the last tasks wait on the scheduler's alarm alone.
    task: { delay_ms: 3_000 },
    ready: (_, produced) => produced,
    async inject(ctx) {
      await ctx.quiet(300);
      const startMs = wallNow();
      await ctx.restart(true);
      // What waits now has no alarm to wake a shard: only the cron will.
      const waiting = await ctx.admin.query<{ id: string }>(`select id::text from sluice.all_tasks where status = 'pending'`);
      return {
        window: { startMs, endMs: wallNow(), affected: waiting.rows.map((r) => r.id) },
        note: `${waiting.rows.length} tasks waiting when the alarm was lost; cron every ${CRON_MS / 1000} s`,
      };
    },
  },
];

export async function runWorkerFault(
  fault: WorkerFault,
  setup: RunSetup & { pgPort: number; rttMs?: number },
  items: number,
): Promise<RunResult & { fault: WorkerFault }> {
  if (fault.restartsPostgres && !setup.db.restart) throw new Error(`${fault.name} restarts Postgres: run it on the matrix's own`);
  // Neon's stand-in reaches Postgres through the matrix's TCP proxy, so the network between
  // them can be cut or stalled too; the Worker names the proxy's address in DATABASE_URL.
  const network = await startTcpProxy({ host: '127.0.0.1', port: setup.pgPort });
  const databaseUrl = new URL(setup.db.url);
  databaseUrl.port = String(network.port);
  const [proxy, script, port, store] = await Promise.all([
    startWsProxy({ host: '127.0.0.1', port: network.port }, { rttMs: setup.rttMs ?? 0 }),
    bundleWorker(),
    freePort(),
    mkdtemp(join(tmpdir(), 'sluice-faults-do-')),
  ]);
  let persist = store;
  const vars = {
    ...setup.env,
    DATABASE_URL: databaseUrl.toString(),
    SLUICE_NEON_WS_PROXY: proxy.address,
    SLUICE_CLUSTER_CAP: String(LIMITS.cluster),
    SLUICE_QUEUES: JSON.stringify(LIMITS.queues),
    SLUICE_LEASE_MS: String(LEASE_MS),
    SLUICE_PUSH_TIMEOUT_MS: String(PUSH_TIMEOUT_MS),
    // 8 shards × 6 pushes: more than the cluster cap, so it can bind.
    SLUICE_DISPATCH_SHARDS: '8',
  };
  let worker: RunningWorker | null = null;
  const admin = new pg.Pool({ connectionString: setup.db.url, max: 4, application_name: 'sluice-faults' });
  admin.on('error', () => {});
  // The cron, as `npm start` fires it (faster here, so that a run waits seconds, not minutes).
  const cron = setInterval(() => void worker?.scheduled().catch(() => {}), CRON_MS);
  const ctx: WorkerContext = {
    db: setup.db,
    admin,
    proxy,
    network,
    async restart(wipe) {
      const old = worker;
      worker = null;
      await old?.close();
      if (wipe) persist = await mkdtemp(join(tmpdir(), 'sluice-faults-do-'));
      worker = await startWorker({ script, vars, port, persist });
    },
    async quiet(quietMs) {
      for (;;) {
        const last = setup.endpoint.pushes.at(-1)?.receivedAt ?? 0;
        if (wallNow() - last >= quietMs) return;
        await sleep(50);
      }
    },
  };
  try {
    const result = await drive({
      setup,
      items,
      fault,
      admin,
      anyUrl: () => `http://127.0.0.1:${port}`,
      start: async () => {
        worker = await startWorker({ script, vars, port, persist });
      },
      inject: () => fault.inject(ctx),
      ...(fault.ready ? { ready: fault.ready } : {}),
    });
    return { ...result, fault };
  } finally {
    clearInterval(cron);
    await (worker as RunningWorker | null)?.close();
    await Promise.all([proxy.close(), admin.end(), network.close()]);
    await Promise.all([rm(store, { recursive: true, force: true }), rm(persist, { recursive: true, force: true })]);
  }
}
