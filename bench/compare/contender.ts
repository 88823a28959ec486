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

/**
 * `sluice`: the keyed limit is Sluice's to enforce, and `--finished` pre-fills its table. `peer`:
 * another queue. `ceiling`: no queue at all, the least the same work can cost (push's bare loop).
 */
export type Role = 'sluice' | 'peer' | 'ceiling';

export interface Contender {
  /** Short name for logs and result files: G16, Gb64, B16, L64, S, Sp16. */
  id: string;
  /** What it is, without its in-flight level: the column a ratio to it is shown under. */
  kind: string;
  /** Jobs in flight in the one worker process: ratios compare contenders at the same level. */
  inFlight: number;
  label: string;
  /** The configuration, as the report prints it. */
  config: string;
  role: Role;
  open(db: Database, options: { keyed: boolean; finished: number }): Promise<Session>;
}

export const BATCH = 500;
/** The in-flight levels every contender runs at: the peers' usual 16, and Sluice's Node default 64. */
export const IN_FLIGHT_LEVELS = [16, 64] as const;
/** The peers' usual level: Sluice's rows at 16, and the size of its engine's pool. */
export const IN_FLIGHT = IN_FLIGHT_LEVELS[0];

/** Connections per worker: in flight + 1, as graphile-worker's perfTest. */
export const poolSize = (inFlight: number) => inFlight + 1;

export function* batches<T>(items: readonly T[], size = BATCH): Generator<T[]> {
  for (let i = 0; i < items.length; i += size) yield items.slice(i, i + size);
}

/** N jobs; keyed: round-robin over `keys` keys, so FIFO within a key is the order of `seq`. */
export function makeJobs(n: number, keys: number | null): BenchJob[] {
  return Array.from({ length: n }, (_, i) =>
    keys === null ? { i, key: null, seq: i } : { i, key: `k${i % keys}`, seq: Math.floor(i / keys) },
  );
}
