/**
 * Sluice as one long-lived process (Node, Bun, Deno): the app over node-postgres, served over
 * HTTP, with a dispatch loop that sleeps until the next due time. Pokes from this process's
 * API wake it directly and reach other instances through LISTEN/NOTIFY. Used by
 * `npm run serve` and by tests that need the lease API reachable over real HTTP.
 */
import { createAdaptorServer } from '@hono/node-server';
import { createApp } from '../api/app.ts';
import { type Config, loadConfig } from '../config.ts';
import { ConfigError } from '../core/errors.ts';
import { RestClock } from '../core/rest.ts';
import { type Poke, WorkWaiters } from '../core/wake.ts';
import type { OpenDb } from '../db/db.ts';
import { isTransientDbError } from '../db/faults.ts';
import { schemaProblem, schemaState } from '../db/migrate.ts';
import { Chores } from '../dispatcher/chores.ts';
import { DispatchLoop } from '../dispatcher/loop.ts';
import { Meter } from '../dispatcher/meter.ts';
import { didWork } from '../dispatcher/report.ts';
import { dispatchRun } from '../dispatcher/run.ts';
import { loadKeyring } from '../security/keyring.ts';
import { type PushSpans, startPushSpans } from './otel.ts';
import { openPgDb } from './pg-db.ts';
import { pinnedTransport } from './pinned-transport.ts';
import { withSyncSigning } from './sync-signing.ts';
import { startWakeChannel } from './wake-channel.ts';

export interface NodeSluice {
  url: string;
  config: Config;
  loop: DispatchLoop | null;
  /** Graceful: stops claiming, lets pushes in flight finish and settle, then closes. */
  close(): Promise<void>;
}

/**
 * The dispatcher's connections: a claim, the group-committed settles, the reap, the next-due
 * probe and notes on unanswered pushes, at most a few at a time.
 */
const DISPATCH_POOL_SIZE = 6;

/** How often counters for /metrics are written (only when something was counted). */
const METER_INTERVAL_MS = 1_000;
/** How often the chores (dispatcher/chores.ts) are looked at; each has its own interval. */
const CHORE_TICK_MS = 1_000;

/**
 * Connections the kernel holds for the server until it accepts them. Node's default (511) is
 * overrun by a burst of clients while the event loop is busy, and the kernel then resets
 * connections before Sluice can answer them (with 503 and Retry-After, say); the kernel caps
 * this at `net.core.somaxconn` (4096 on current Linux).
 */
const LISTEN_BACKLOG = 4_096;

/** A run's time budget: long runs are fine here, but a fresh run re-reads nothing it needs. */
const RUN_BUDGET_MS = 30_000;
/**
 * How long an idle run waits for more work before it ends (dispatcher/run.ts `lingerMs`): a
 * poke meanwhile is claimed at once, without the run's tail and a new run's reap, and a retry due
 * meanwhile is claimed as it comes due.
 */
const RUN_LINGER_MS = 1_000;

/**
 * The database cannot serve this version (db/migrate.ts `schemaState`: its schema is missing or
 * behind), or refuses the connection: nothing starts, and the start says why in one line.
 */
export class SchemaError extends Error {
  override name = 'SchemaError';
}

export async function startNodeSluice(options: {
  env: Record<string, string | undefined>;
  port?: number;
  host?: string;
  /**
   * The longest the loop sleeps when nothing is due: the fallback for lost wake-ups. Default 30 s.
   * Not at rest (core/rest.ts): then only a wake-up or a due time runs it.
   */
  maxSleepMs?: number;
  /** Connections to Postgres for the API. Default 20. */
  poolSize?: number;
  /** How long an API query waits for a connection before it fails as unavailable (503). Default 5 s. */
  connectTimeoutMs?: number;
  /** Run a dispatcher in this process. Default true; false serves only the API. */
  dispatch?: boolean;
}): Promise<NodeSluice> {
  const config = loadConfig(options.env, 'node');
  // The API's requests give up on a connection in time (503); the dispatcher has a pool of its
  // own that waits, so that API load can never make it drop a settle (a push already made).
  const db = openPgDb(config.databaseUrl, options.poolSize ?? 20, options.connectTimeoutMs);
  const dispatchDb = openPgDb(config.databaseUrl, DISPATCH_POOL_SIZE, 0);
  const shared: OpenDb = { ...db, close: async () => {} };
  // A database that is not migrated for this version would fail every request and every claim.
  // One that does not answer yet is waited for as before: the API answers 503 meanwhile, and
  // /healthz says whether the schema is right once it answers.
  const state = await schemaState(db).catch(async (error: unknown) => {
    if (isTransientDbError(error)) {
      console.warn('sluice: the database does not answer yet; starting anyway (503 until it does)');
      return 'current' as const;
    }
    await Promise.all([db.close(), dispatchDb.close()]);
    // Refused, not passing (a user, a password, a database that does not exist): the operator's
    // to fix in DATABASE_URL, said in one line.
    throw new SchemaError(`DATABASE_URL: the database refused the connection: ${(error as Error).message}`);
  });
  if (state !== 'current') {
    await Promise.all([db.close(), dispatchDb.close()]);
    throw new SchemaError(schemaProblem(state));
  }
  const keyring = withSyncSigning(await loadKeyring(config.signingKeys));
  // Spans over OTLP when the environment names an endpoint (a bad one stops the start here).
  let spans: PushSpans | null;
  try {
    spans = startPushSpans(options.env);
  } catch (error) {
    await Promise.all([db.close(), dispatchDb.close()]);
    throw error;
  }
  // Pushes resolve the target once, refuse private addresses, and connect to the one checked.
  const push = pinnedTransport({ allowPrivate: config.allowPrivateTargets });
  // Counts for /metrics, kept across runs and written at most once a second.
  const meter = new Meter();
  // Every request, poke and run that did something is work; without any for
  // SLUICE_REST_AFTER_MS, and with nothing due, the process sends Postgres nothing.
  const rest = new RestClock(config.restAfterMs);
  const loop =
    options.dispatch === false
      ? null
      : new DispatchLoop(
          async (signal, nudges) => {
            const report = await dispatchRun(
              {
                db: dispatchDb,
                config,
                keyring,
                transport: push,
                meter,
                meterIntervalMs: METER_INTERVAL_MS,
                ...(spans ? { pushed: spans.pushed } : {}),
              },
              { budgetMs: RUN_BUDGET_MS, signal, nudges, lingerMs: RUN_LINGER_MS },
            );
            if (didWork(report)) rest.worked();
            rest.due(report.more ? Date.now() : report.nextDueInMs === null ? null : Date.now() + report.nextDueInMs);
            return report;
          },
          {
            maxSleepMs: options.maxSleepMs ?? 30_000,
            resting: () => rest.resting(),
          },
        );
  const waiters = new WorkWaiters();
  const wake = (poke: Poke) => {
    rest.worked();
    loop?.wake(poke.atMs);
    waiters.wake(poke, Date.now());
  };
  const channel = startWakeChannel({ databaseUrl: config.databaseUrl, db, onPoke: wake, rest });
  // A long-lived process has no invocation to extend: background work just runs.
  const ctx = {
    waitUntil: (p: Promise<unknown>) => void p.catch((e) => console.error('sluice: background work failed', e)),
    passThroughOnException: () => {},
    props: {},
  };
  // The socket's address for each request, for the bad-key brake.
  const addresses = new WeakMap<Request, string>();
  const startedAt = Date.now() - process.uptime() * 1000;
  const app = createApp({
    clientAddress: (request) => addresses.get(request) ?? null,
    processStats: () => {
      const cpu = process.cpuUsage();
      const memory = process.memoryUsage();
      return {
        cpuSeconds: (cpu.user + cpu.system) / 1e6,
        residentBytes: memory.rss,
        heapUsedBytes: memory.heapUsed,
        startTimeSeconds: startedAt / 1000,
      };
    },
    openDb: () => shared,
    ...(spans ? { spans } : {}),
    poke(poke) {
      wake(poke);
      channel.announce(poke);
    },
    awaitWork: (queue, ms) => waiters.wait(queue, ms),
  });
  const host = options.host ?? '127.0.0.1';
  const server = createAdaptorServer({
    fetch: (request, node) => {
      const address = node.incoming.socket.remoteAddress;
      if (address) addresses.set(request, address);
      rest.worked();
      return app.fetch(request, options.env, ctx);
    },
    hostname: host,
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ port: options.port ?? 0, host, backlog: LISTEN_BACKLOG }, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (error) {
    // A port in use (often by `npm start`'s Worker) is the operator's to fix, in one line.
    await channel.close();
    push.close();
    await Promise.all([db.close(), dispatchDb.close(), spans?.shutdown().catch(() => {})]);
    const code = (error as { code?: unknown }).code;
    if (code === 'EADDRINUSE' || code === 'EACCES' || code === 'EADDRNOTAVAIL') {
      const why = code === 'EADDRINUSE' ? 'is in use by another process (npm start?)' : `cannot be listened on (${code})`;
      throw new ConfigError([{ path: 'PORT', message: `${host}:${options.port ?? 0} ${why}: set PORT (and HOST) to a free one` }]);
    }
    throw error;
  }
  const address = server.address() as { port: number };
  loop?.start();
  // Off the dispatch path: retention every bucket width, at least once a minute (the Worker's
  // cron and first pusher shard do the same), counts
  // for /metrics every 15 s (the cron's minute on the Worker), and counters a long run holds.
  // One count at a time: a slow one (a large table) is not joined by the next.
  const chores = new Chores(config);
  const doChores = () => {
    if (!rest.resting()) void chores.runDue(dispatchDb, Date.now());
  };
  const timers = loop
    ? [setInterval(doChores, CHORE_TICK_MS), setInterval(() => void meter.write(dispatchDb, { now: Date.now() }), METER_INTERVAL_MS)]
    : [];
  if (loop) doChores();
  let closing: Promise<void> | null = null;
  return {
    url: `http://${host}:${address.port}`,
    config,
    loop,
    close() {
      closing ??= (async () => {
        // The API stays up while pushes drain: their endpoints may still call the lease API.
        for (const timer of timers) clearInterval(timer);
        await loop?.stop();
        await chores.settled();
        await meter.write(dispatchDb, { now: Date.now() });
        await new Promise<void>((resolve) => server.close(() => resolve()));
        await channel.close();
        push.close();
        await Promise.all([
          db.close(),
          dispatchDb.close(),
          spans?.shutdown().catch((e) => console.error('sluice: sending spans failed', e)),
        ]);
      })();
      return closing;
    },
  };
}
