/**
 * What a run does with a push's outcome: counts it, and writes what it decides (core/outcome.ts)
 * through the group-committing settler. Never throws: a lease that cannot be settled expires and
 * is reaped.
 */
import { unansweredNote } from '../core/lease.ts';
import { decide, endpointHealth, type Outcome, pushSignal } from '../core/outcome.ts';
import type { LeasedTask } from '../core/types.ts';
import type { Db } from '../db/db.ts';
import { leaseNote } from '../db/leases.ts';
import { levelsLearnUnanswered } from '../db/levels.ts';
import { leaseEnding } from '../db/settle.ts';
import type { Meter } from './meter.ts';
import type { RunReport } from './report.ts';
import { withDbRetry } from './retry-db.ts';
import type { Settler } from './settler.ts';

export interface RecordDeps {
  db: Db;
  settler: Settler;
  meter: Meter;
  report: RunReport;
  log: Pick<Console, 'warn' | 'error'>;
  now: () => number;
  random: () => number;
  /** The environment's adaptive queues (an override may change any): for the unanswered pushes' signals. */
  adaptiveQueues?: readonly string[];
  /** Failures in a row that pause an origin (`SLUICE_ENDPOINT_PAUSE_AFTER`; 0: never). */
  endpointPauseAfter?: number;
}

/**
 * Returns the recorder: `require: 'expired'` writes only while the lease is still expired (the
 * reaper's; a heartbeat that landed since its read wins).
 */
export function outcomeRecorder(deps: RecordDeps) {
  const { db, settler, meter, report, log } = deps;
  return async (task: LeasedTask, outcome: Outcome, durationMs: number | null, require?: 'expired'): Promise<void> => {
    if (durationMs !== null) meter.observe('push_duration', task.queue, durationMs / 1000);
    // A push made (not the reaper's finding of an expired lease): an attempt of its origin,
    // counted in memory, so that a healthy origin costs the settle nothing (db/metrics.ts).
    if (require === undefined && task.url !== null && endpointHealth(outcome) !== null) meter.attempt(task.url);
    if (outcome.type === 'lease_kept') {
      // The endpoint holds the lease now; it ends it with a lease call, or it expires.
      report.leaseKept++;
      meter.add('pushes', task.queue, 'lease_kept');
      return;
    }
    if (outcome.type === 'unanswered') {
      // The handler may still be running: its slot stays taken until the lease expires (then
      // the reaper counts a timed-out attempt) or the handler ends the lease with its token.
      // What happened is noted now, so that it can be seen meanwhile and kept at expiry.
      report.unanswered++;
      meter.add('pushes', task.queue, 'unanswered');
      // Said once per push: its key and queue may wait on this slot until then.
      log.warn(
        `sluice: the push of task ${task.id} (queue ${task.queue}${task.concurrencyKey === null ? '' : `, key ${task.concurrencyKey}`}) went unanswered (${outcome.error}); its slot is held until its lease expires at ${task.lease.expiresAt.toISOString()}`,
      );
      report.roundTrips++;
      await withDbRetry(() => leaseNote(db, task.id, task.lease.id, unansweredNote(task.attempts, outcome.error))).catch((error: unknown) =>
        log.warn(`sluice: noting the unanswered push of task ${task.id} failed`, error),
      );
      // No answer in time, or a connection lost: a sign of overload, for an adaptive queue's level.
      const { cause } = outcome;
      meter.add('overloads', task.queue, 'unanswered');
      await withDbRetry(() =>
        levelsLearnUnanswered(
          db,
          { taskId: task.id, queue: task.queue, concurrencyKey: task.concurrencyKey, leasedAt: task.lease.leasedAt, cause, url: task.url },
          deps.adaptiveQueues ?? [],
          deps.endpointPauseAfter ?? 0,
        ),
      ).catch((error: unknown) => log.warn(`sluice: learning from the unanswered push of task ${task.id} failed`, error));
      return;
    }
    const settlement = decide(task, outcome, deps.now(), deps.random());
    const signal = pushSignal(outcome);
    if (signal === 'hold') meter.add('overloads', task.queue, 'retry_after');
    else if (signal === 'overload')
      meter.add('overloads', task.queue, outcome.type === 'failed' && outcome.status ? `http_${outcome.status}` : 'refused');
    let held: boolean;
    try {
      held = await settler.settle({
        ...leaseEnding(task, settlement, durationMs),
        // An expired lease is no answer: the reaper's settlement says nothing of the endpoint.
        ...(require
          ? { require }
          : {
              signal: {
                signal,
                queue: task.queue,
                concurrencyKey: task.concurrencyKey,
                deferrals: task.deferrals,
                url: task.url,
                health: endpointHealth(outcome),
                pauseAfter: deps.endpointPauseAfter ?? 0,
              },
            }),
      });
    } catch (error) {
      log.error(`sluice: settling task ${task.id} failed; its lease will expire and be reaped`, error);
      return;
    }
    const ended: 'lost' | 'succeeded' | 'dead' | 'deferred' | 'retried' = !held
      ? 'lost'
      : settlement.status === 'succeeded'
        ? 'succeeded'
        : settlement.status === 'dead'
          ? 'dead'
          : outcome.type === 'deferred'
            ? 'deferred'
            : 'retried';
    report[ended]++;
    // An expired lease was no push: the reaper counts it as an expiry.
    if (require !== 'expired') meter.add('pushes', task.queue, ended);
  };
}
