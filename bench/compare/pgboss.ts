/**
 * pg-boss, tuned as its docs allow for throughput: 16 workers fetching 50 jobs a time, polling at
 * the 0.5 s floor, fetching again at once while batches come back full, and LISTEN/NOTIFY so an
 * idle worker wakes when a job is sent. Keyed jobs go to a `key_strict_fifo` queue with
 * `singletonKey` = key. Enqueue and work use separate instances, so the worker's start is timed.
 */
import { PgBoss, type WorkOptions } from 'pg-boss';
import { type BenchJob, batches, type Contender, IN_FLIGHT, POOL_SIZE } from './contender.ts';

const QUEUE = 'bench';
const WORK: WorkOptions = { localConcurrency: IN_FLIGHT, batchSize: 50, pollingIntervalSeconds: 0.5, burstWhenBatchFull: true };

function boss(url: string, max: number): PgBoss {
  const instance = new PgBoss({ connectionString: url, max, useListenNotify: true });
  instance.on('error', (error) => console.error(`[pg-boss] ${error.message}`));
  return instance;
}

export const pgBossTuned: Contender = {
  id: 'B',
  label: 'pg-boss tuned',
  config: `work(): localConcurrency ${IN_FLIGHT}, batchSize 50, pollingIntervalSeconds 0.5, burstWhenBatchFull; max ${POOL_SIZE} connections, useListenNotify + queue notify; keyed: policy key_strict_fifo, singletonKey = key; enqueue with insert(), 500 a call`,
  sluice: false,
  async open(db, { keyed }) {
    const producer = boss(db.url, 2);
    await producer.start();
    await producer.createQueue(QUEUE, { policy: keyed ? 'key_strict_fifo' : 'standard', notify: true });
    const insert = (job: BenchJob) => ({ data: job, ...(job.key === null ? {} : { singletonKey: job.key }) });
    return {
      cpu: 'self',
      async enqueue(jobs) {
        for (const batch of batches(jobs)) await producer.insert(QUEUE, batch.map(insert));
      },
      async enqueueOne(job) {
        await producer.send(QUEUE, job);
      },
      async start(handler) {
        const worker = boss(db.url, POOL_SIZE);
        await worker.start();
        await worker.work<BenchJob>(QUEUE, WORK, async (jobs) => {
          await Promise.all(jobs.map((job) => handler.handle(job.data)));
        });
        return { stop: () => worker.stop({ graceful: true, close: true, timeout: 30_000 }) };
      },
      close: () => producer.stop({ graceful: false, close: true }),
    };
  },
};
