/**
 * pg-boss, tuned as its docs allow for throughput (bench/compare/pgboss-sweep.ts measured the
 * settings; TUNED says what it found). Keyed jobs go to a `key_strict_fifo` queue with
 * `singletonKey` = key, unless a tuning names pg-boss's other per-key limit, groups. Enqueue and
 * work use separate instances, so the worker's start is timed.
 *
 * How a worker waits (12.38, dist/manager.js `resolveInterval`, dist/worker.js `run`): after a fetch
 * that came back full it fetches again at once (`burstWhenBatchFull`); after a short one it waits
 * `pollingIntervalSeconds`, or `notifyPollingIntervalSeconds` (default 30) while the queue has
 * `notify` and the instance listens, unless a NOTIFY wakes it. Only inserts notify, not completions,
 * so in a keyed drain, where a fetch is short whenever its keys' heads are held by other workers,
 * that 30 s is a stall.
 */
import { type ConstructorOptions, PgBoss, type WorkOptions } from 'pg-boss';
import { BATCH, type BenchJob, batches, type Contender, poolSize } from './contender.ts';

const QUEUE = 'bench';

/** One way to run pg-boss: its `work()` options beside `localConcurrency`, and what they need around them. */
export interface PgBossTuning {
  work: Omit<WorkOptions, 'localConcurrency'>;
  /** LISTEN/NOTIFY: the instances' `useListenNotify` and the queue's `notify`. */
  notify: boolean;
  /** The worker instance's other constructor options (the stats that `burstWhenReadyExceeds` reads). */
  instance?: Pick<ConstructorOptions, 'monitorIntervalSeconds' | 'superviseIntervalSeconds' | 'queueCacheIntervalSeconds'>;
  /**
   * Keyed runs: `key_strict_fifo` (a `singletonKey` per job), or `group` (a standard queue, the key
   * as the job's group id, limited by `work.groupConcurrency` or `work.localGroupConcurrency`).
   */
  keyedBy: 'key_strict_fifo' | 'group';
  /**
   * Keyed runs: at most one job of a key per `insert()` call. A key's order is `created_on`, and a
   * call's jobs share one (pg-boss's `job_now()`), their ties broken by their random uuids: two of a
   * key in one call may start in either order.
   */
  keyOncePerInsert: boolean;
}

/** The wait after a short fetch at its floor (0.5 s, attorney.js), NOTIFY on or off. */
export const POLL_FLOOR = { pollingIntervalSeconds: 0.5, notifyPollingIntervalSeconds: 0.5 };

/**
 * The best settings pgboss-sweep.ts found at each in-flight level (localConcurrency), on 2 cores
 * with 20,000 jobs over 100 keys; `why` keeps the figures, as bench/results is not kept in git.
 */
const TUNED: Record<number, { drain: PgBossTuning; keyed: PgBossTuning; why: string }> = {
  16: {
    drain: {
      work: { batchSize: 200, ...POLL_FLOOR, burstWhenBatchFull: true },
      notify: true,
      keyedBy: 'key_strict_fifo',
      keyOncePerInsert: true,
    },
    keyed: {
      work: { batchSize: 50, ...POLL_FLOOR, burstWhenBatchFull: true },
      notify: true,
      keyedBy: 'key_strict_fifo',
      keyOncePerInsert: true,
    },
    why: "Why: the sweep's best medians. Drain: batchSize 200 (50: −10%). Keyed: batchSize 50 with burstWhenBatchFull and the wait after a short fetch at its floor, 3,857–4,288 jobs/s; the NOTIFY backstop's 30 s default stalls it (only inserts notify), batchSize 1–10 and 100 fetch too often or are rarely full; a key once per insert() keeps FIFO (a call's jobs share created_on)",
  },
  64: {
    drain: {
      work: { batchSize: 100, ...POLL_FLOOR, burstWhenBatchFull: true },
      notify: true,
      keyedBy: 'key_strict_fifo',
      keyOncePerInsert: true,
    },
    keyed: {
      work: { batchSize: 50, pollingIntervalSeconds: 0.5, notifyPollingIntervalSeconds: 30, burstWhenBatchFull: true },
      notify: true,
      keyedBy: 'key_strict_fifo',
      keyOncePerInsert: true,
    },
    why: "Why: the sweep's best medians. Drain: batchSize 100 (50: −6%). Keyed: a key_strict_fifo fetch ranks every pending job (15–30 ms of Postgres CPU at 20,000), so 64 workers polling every 0.5–2 s saturate 2 cores (≤ 2,000 jobs/s); with NOTIFY's 30 s backstop the idle ones sleep while those fetching full batches of 50 go on, 2,936–3,376 jobs/s over 8 runs, no stall (at batchSize 100, stalls of 30 s)",
  },
};

/** pg-boss at its best measured settings for `inFlight` workers. */
export function pgBossTuned(inFlight: number): Contender {
  const tuned = TUNED[inFlight];
  if (!tuned) throw new Error(`pg-boss: no tuned settings for ${inFlight} in flight (pgboss-sweep.ts measures them)`);
  return pgBoss({ id: `B${inFlight}`, label: `pg-boss tuned, ${inFlight} in flight`, inFlight, ...tuned });
}

/** `work()` options as the report prints them. */
export function describeWork(tuning: PgBossTuning): string {
  const work = Object.entries(tuning.work).map(([k, v]) => (v === true ? k : `${k} ${v}`));
  const instance = Object.entries(tuning.instance ?? {}).map(([k, v]) => `${k} ${v}`);
  return [...work, tuning.notify ? 'useListenNotify + queue notify' : 'no LISTEN/NOTIFY', ...instance].join(', ');
}

function boss(url: string, max: number, tuning: PgBossTuning, withInstance: boolean): PgBoss {
  const instance = new PgBoss({
    connectionString: url,
    max,
    useListenNotify: tuning.notify,
    ...(withInstance ? tuning.instance : {}),
  });
  instance.on('error', (error) => console.error(`[pg-boss] ${error.message}`));
  return instance;
}

/** At most one job of a key per batch, in order: how the keyed jobs reach `insert()` when `keyOncePerInsert`. */
function* keyOnceBatches(jobs: readonly BenchJob[]): Generator<BenchJob[]> {
  let batch: BenchJob[] = [];
  let keys = new Set<string | null>();
  for (const job of jobs) {
    if (keys.has(job.key) || batch.length === BATCH) {
      yield batch;
      batch = [];
      keys = new Set();
    }
    batch.push(job);
    keys.add(job.key);
  }
  if (batch.length > 0) yield batch;
}

export function pgBoss(options: {
  id: string;
  label: string;
  inFlight: number;
  drain: PgBossTuning;
  keyed: PgBossTuning;
  /** Why these settings, for the report. */
  why?: string;
}): Contender {
  const { inFlight, drain, keyed } = options;
  const pool = poolSize(inFlight);
  const keyedHow = keyed.keyedBy === 'key_strict_fifo' ? 'policy key_strict_fifo, singletonKey = key' : 'standard policy, group id = key';
  return {
    id: options.id,
    kind: 'pg-boss',
    inFlight,
    label: options.label,
    config: `work(): localConcurrency ${inFlight}, ${describeWork(drain)}; keyed: ${keyedHow}, ${describeWork(keyed)}; max ${pool} connections; enqueue with insert(), ${BATCH} a call${keyed.keyOncePerInsert ? ' (keyed: a key at most once a call)' : ''}${options.why ? `. ${options.why}` : ''}`,
    role: 'peer',
    async open(db, { keyed: isKeyed }) {
      const tuning = isKeyed ? keyed : drain;
      const producer = boss(db.url, 2, tuning, false);
      await producer.start();
      const strict = isKeyed && tuning.keyedBy === 'key_strict_fifo';
      await producer.createQueue(QUEUE, { policy: strict ? 'key_strict_fifo' : 'standard', notify: tuning.notify });
      const insert = (job: BenchJob) => ({
        data: job,
        ...(job.key === null ? {} : strict ? { singletonKey: job.key } : { group: { id: job.key } }),
      });
      return {
        cpu: 'self',
        async enqueue(jobs) {
          for (const batch of isKeyed && tuning.keyOncePerInsert ? keyOnceBatches(jobs) : batches(jobs)) {
            await producer.insert(QUEUE, batch.map(insert));
          }
        },
        async enqueueOne(job) {
          await producer.send(QUEUE, job);
        },
        async start(handler) {
          const worker = boss(db.url, pool, tuning, true);
          await worker.start();
          await worker.work<BenchJob>(QUEUE, { ...tuning.work, localConcurrency: inFlight }, async (jobs) => {
            await Promise.all(jobs.map((job) => handler.handle(job.data)));
          });
          return { stop: () => worker.stop({ graceful: true, close: true, timeout: 30_000 }) };
        },
        close: () => producer.stop({ graceful: false, close: true }),
      };
    },
  };
}
