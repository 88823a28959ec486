/**
 * One measured run of one contender: the drain (N jobs enqueued in bulk, then worked off; cost
 * read around the drain) and the idle latency probe. Each on a fresh database, dropped after.
 */
import { performance } from 'node:perf_hooks';
import type { Cluster } from './cluster.ts';
import type { BenchJob, Contender } from './contender.ts';
import { type Cost, costBetween, snapshot, topStatements } from './measure.ts';
import { DrainTally, LatencyProbe } from './tally.ts';

export interface DrainRun {
  /** Jobs completed: all of them, unless the drain hit its time limit. */
  jobs: number;
  /** Stopped at the time limit with jobs left: the rate is of the part done. */
  partial: boolean;
  enqueueMs: number;
  /** Worker start to the N-th completion (Sluice over HTTP: to every task `succeeded` in the database). */
  drainMs: number;
  /** Worker start to the worker stopped, its completions flushed. */
  stoppedMs: number;
  cost: Cost;
  overlaps: number;
  fifoViolations: number;
  top: Array<{ query: string; calls: number; meanMs: number }>;
}

let serial = 0;

export async function drain(
  cluster: Cluster,
  contender: Contender,
  jobs: readonly BenchJob[],
  options: { keyed: boolean; finished: number; limitMs: number },
): Promise<DrainRun> {
  const db = await cluster.database(`bench_${contender.id.toLowerCase()}_${++serial}`);
  try {
    const session = await contender.open(db, { keyed: options.keyed, finished: contender.role === 'sluice' ? options.finished : 0 });
    try {
      const enqueueStart = performance.now();
      await session.enqueue(jobs);
      const enqueueMs = performance.now() - enqueueStart;
      await db.settle();

      const tally = new DrainTally(jobs.length);
      const before = await snapshot(cluster, db, session.cpu);
      const start = performance.now();
      const worker = await session.start(tally, jobs.length);
      let timer: NodeJS.Timeout | undefined;
      const limit = new Promise<'limit'>((resolve) => {
        timer = setTimeout(() => resolve('limit'), options.limitMs);
      });
      const partial = (await Promise.race([tally.finished, limit])) === 'limit';
      clearTimeout(timer);
      if (!partial) await worker.settled?.();
      const done = tally.done;
      const drainMs = performance.now() - start;
      await worker.stop();
      const stoppedMs = performance.now() - start;
      const after = await snapshot(cluster, db, session.cpu);
      return {
        jobs: partial ? done : jobs.length,
        partial,
        enqueueMs,
        drainMs,
        stoppedMs,
        cost: await costBetween(cluster, before, after),
        overlaps: tally.overlaps,
        fifoViolations: tally.fifoViolations(),
        top: await topStatements(cluster, db),
      };
    } finally {
      await session.close();
    }
  } finally {
    await db.drop();
  }
}

export interface LatencyRun {
  /** Enqueue call returned → handler start, ms, in send order. */
  samples: number[];
  /** How long the enqueue call itself took, ms. */
  enqueueCall: number[];
}

/** `count` single enqueues `gapMs` apart into an idle worker; the first `warmup` are not kept. */
export async function latency(cluster: Cluster, contender: Contender, count: number, gapMs: number, warmup: number): Promise<LatencyRun> {
  const db = await cluster.database(`bench_${contender.id.toLowerCase()}_${++serial}`);
  try {
    const session = await contender.open(db, { keyed: false, finished: 0 });
    try {
      const probe = new LatencyProbe();
      const worker = await session.start(probe, warmup + count);
      const samples: number[] = [];
      const enqueueCall: number[] = [];
      for (let i = 0; i < warmup + count; i++) {
        const job = { i, key: null, seq: i };
        const calling = performance.now();
        await session.enqueueOne(job);
        const returned = performance.now();
        const arrived = await probe.arrival(i);
        if (i >= warmup) {
          samples.push(arrived - returned);
          enqueueCall.push(returned - calling);
        }
        await new Promise((r) => setTimeout(r, gapMs));
      }
      await worker.stop();
      return { samples, enqueueCall };
    } finally {
      await session.close();
    }
  } finally {
    await db.drop();
  }
}
