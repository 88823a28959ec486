/**
 * What every contender implements, and the jobs they run. A contender opens a session on a fresh
 * database, enqueues through its own bulk path, then starts its worker with the harness's handler.
 */
import type { Database } from './cluster.ts';
import type { NodeCpu } from './measure.ts';

/** A no-op job: its index, and for keyed runs its key and its place within the key. */
export interface BenchJob {
  i: number;
  key: string | null;
  seq: number;
}

/** The harness's side of a job run: called by every contender's handler, awaited before it returns. */
export interface Handler {
  handle(job: BenchJob): Promise<void>;
}

export interface Worker {
  /** Resolves once the work is durable where the handler count cannot tell (Sluice over HTTP). */
  settled?(): Promise<void>;
  stop(): Promise<void>;
}

export interface Session {
  /** Where the worker's Node CPU is read. */
  cpu: NodeCpu;
  /** Enqueues through the contender's bulk path, in batches of `BATCH`. */
  enqueue(jobs: readonly BenchJob[]): Promise<void>;
  /** Enqueues one job and resolves when the call returns (the latency probe's start). */
  enqueueOne(job: BenchJob): Promise<void>;
  /** Starts the worker; `expected` jobs will be handled before it is stopped. */
  start(handler: Handler, expected: number): Promise<Worker>;
  close(): Promise<void>;
}

export interface Contender {
  /** Short name for tables and ratios: G, Gb, B, S, Sp. */
  id: string;
  label: string;
  /** The configuration, as the report prints it. */
  config: string;
  /** Sluice only: the keyed limit is theirs to enforce, and `--finished` pre-fills their table. */
  sluice: boolean;
  open(db: Database, options: { keyed: boolean; finished: number }): Promise<Session>;
}

export const BATCH = 500;
/** Jobs in flight in the one worker process, for every contender. */
export const IN_FLIGHT = 16;
/** Connections per worker: in flight + 1, as graphile-worker's perfTest. */
export const POOL_SIZE = IN_FLIGHT + 1;

export function* batches<T>(items: readonly T[], size = BATCH): Generator<T[]> {
  for (let i = 0; i < items.length; i += size) yield items.slice(i, i + size);
}

/** N jobs; keyed: round-robin over `keys` keys, so FIFO within a key is the order of `seq`. */
export function makeJobs(n: number, keys: number | null): BenchJob[] {
  return Array.from({ length: n }, (_, i) =>
    keys === null ? { i, key: null, seq: i } : { i, key: `k${i % keys}`, seq: Math.floor(i / keys) },
  );
}
