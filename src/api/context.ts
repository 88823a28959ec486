/** What every request handler can reach: the config, the database, and the dispatcher poke. */
import type { Config, Env } from '../config.ts';
import type { Poke } from '../core/wake.ts';
import type { Db, OpenDb } from '../db/db.ts';
import type { QueueScope } from '../security/api-keys.ts';
import type { Keyring } from '../security/keyring.ts';

export interface ExecutionContextLike {
  waitUntil(promise: Promise<unknown>): void;
}

/** How the app reaches what differs between Workers and a long-lived server. */
export interface Platform {
  /** A database handle for one request; closed when the request is done. */
  openDb(config: Config): OpenDb;
  /** The client's network address, where the platform knows it (for the bad-key brake). */
  clientAddress(request: Request): string | null;
  /** Tells the dispatcher that work comes due (docs/DESIGN.md §6), without delaying the response. */
  poke(poke: Poke, config: Config, env: Env, ctx: ExecutionContextLike): void;
  /**
   * A waiting pull's wait (api/pull.ts): resolves at a poke for now that concerns `queue`, or
   * after `ms`. Every `poke` above must reach it.
   */
  awaitWork(queue: string, ms: number, env: Env): Promise<void>;
  /** The serving process's own figures for /metrics, where there is a process (not on Workers). */
  processStats?: () => ProcessStats;
  /** Spans of enqueues and lease calls made in a trace (the Node server's: src/node/otel.ts). */
  spans?: RequestSpans;
}

/** Told of a request that carried a `traceparent`, once it is answered. */
export interface RequestSpans {
  request(span: {
    name: string;
    traceparent: string;
    startedAtMs: number;
    endedAtMs: number;
    method: string;
    path: string;
    status: number;
  }): void;
}

/** What a long-lived process says of itself at /metrics (the `process_*` series). */
export interface ProcessStats {
  cpuSeconds: number;
  residentBytes: number;
  heapUsedBytes: number;
  startTimeSeconds: number;
}

export interface AppEnv {
  Bindings: Env;
  Variables: {
    config: Config;
    db: Db;
    keyring: () => Promise<Keyring>;
    clientAddress: string | null;
    /** The caller's key may read tasks (`tasks:read` or `admin`); set by `requireScope`. */
    canRead: boolean;
    /** The origins besides loopback the caller's key may forward pulls to; set by `requireScope`. */
    forwardTo: readonly string[];
    /** The queues the caller's key may use, `null` for every queue (api/queue-access.ts); set by `requireScope`. */
    queueScope: QueueScope;
    /** The task a lease call's verified token names (lease routes only). */
    leaseTaskId: string;
    /** Work came due: now (a lease ended, a limit changed), or at the given time (an enqueue). */
    poke: (poke?: Poke) => void;
    /** Waits for work of a pull queue (Platform `awaitWork`). */
    awaitWork: (queue: string, ms: number) => Promise<void>;
    /** The serving process's figures, `null` on Workers. */
    processStats: (() => ProcessStats) | null;
  };
}
