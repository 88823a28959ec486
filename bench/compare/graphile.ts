/**
 * graphile-worker, in its two documented configurations: the default (a fetch and a complete per
 * job) and batched (`localQueue` of 500, completes and fails flushed at once). Keyed jobs get
 * `queueName` = key: a named queue runs its jobs one at a time, in order.
 */
import { Logger, makeWorkerUtils, run, runMigrations, type WorkerUtils } from 'graphile-worker';
import { type BenchJob, batches, type Contender, poolSize } from './contender.ts';

/** Errors only: the info lines (worker started, stopped) would drown the report. */
const logger = new Logger(() => (level, message) => {
  if (level === 'error') console.error(`[graphile-worker] ${message}`);
});

const BATCHED = { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 };

/** `inFlight`: the worker's `concurrency`, with a connection each and one to spare. */
export function graphile(batched: boolean, inFlight: number): Contender {
  const kind = `graphile-worker ${batched ? 'batched' : 'default'}`;
  return {
    id: `G${batched ? 'b' : ''}${inFlight}`,
    kind,
    inFlight,
    label: `${kind}, ${inFlight} in flight`,
    config: `concurrency ${inFlight}, maxPoolSize ${poolSize(inFlight)}, ${batched ? 'localQueue.size 500, completeJobBatchDelay 0, failJobBatchDelay 0' : 'no localQueue, no batch delays (defaults)'}; enqueue with addJobs, ${500} a call`,
    role: 'peer',
    async open(db) {
      await runMigrations({ connectionString: db.url, logger });
      const utils: WorkerUtils = await makeWorkerUtils({ connectionString: db.url, maxPoolSize: 2, logger });
      const spec = (job: BenchJob) => ({ identifier: 'noop', payload: job, ...(job.key === null ? {} : { queueName: job.key }) });
      return {
        cpu: 'self',
        async enqueue(jobs) {
          for (const batch of batches(jobs)) await utils.addJobs(batch.map(spec));
        },
        async enqueueOne(job) {
          await utils.addJob('noop', job);
        },
        async start(handler) {
          const runner = await run({
            connectionString: db.url,
            concurrency: inFlight,
            maxPoolSize: poolSize(inFlight),
            noHandleSignals: true,
            logger,
            taskList: { noop: (payload) => handler.handle(payload as BenchJob) },
            ...(batched ? { preset: { worker: BATCHED } } : {}),
          });
          return { stop: () => runner.stop() };
        },
        async close() {
          await utils.release();
        },
      };
    },
  };
}
