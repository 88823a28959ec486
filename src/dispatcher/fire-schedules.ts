/**
 * The dispatcher's schedule step (docs/guide.md "Schedules"): every due schedule fires its slot, by
 * the catch-up rule (src/core/schedule.ts), with one compare-and-set statement each
 * (src/db/schedules.ts), so racing dispatchers fire each slot once between them.
 */
import { parseCron, planFiring } from '../core/schedule.ts';
import type { Queryable } from '../db/db.ts';
import { scheduleFire, schedulesDue } from '../db/schedules.ts';
import { withDbRetry } from './retry-db.ts';

export interface FireReport {
  /** Tasks enqueued. */
  fired: number;
  /** Slots skipped because the previous firing's task was unfinished (overlap `skip`). */
  skipped: number;
  /** Schedules some other dispatcher fired first. */
  lost: number;
  /** Database round trips. */
  statements: number;
}

/** Due schedules read per statement; more are read while a whole batch came back. */
const BATCH = 100;

/**
 * Fires every schedule due by `now` (default: the database's clock, which the next-due probe
 * uses too; tests move time by passing one).
 */
export async function fireDueSchedules(db: Queryable, options: { now?: Date; log?: Pick<Console, 'error'> } = {}): Promise<FireReport> {
  const log = options.log ?? console;
  const report: FireReport = { fired: 0, skipped: 0, lost: 0, statements: 0 };
  const failed = new Set<string>();
  for (;;) {
    const due = await withDbRetry(() => schedulesDue(db, { now: options.now, limit: BATCH + failed.size }));
    report.statements++;
    const todo = due.filter((s) => !failed.has(s.name));
    for (const s of todo) {
      const parsed = parseCron(s.cron, s.timezone);
      const plan = 'cron' in parsed ? planFiring(parsed.cron, s.nextFireAt, s.now) : null;
      if (!plan) {
        // Only a runtime that lacks the zone (another ICU) can get here: the API checked both.
        log.error(`sluice: schedule ${s.name} cannot be read here (${'problem' in parsed ? parsed.problem : 'not due'}); it is left due`);
        failed.add(s.name);
        continue;
      }
      // Safe to repeat: a firing whose answer was lost moved the slot on, so its repeat finds
      // nothing to fire (compare-and-set).
      const result = await withDbRetry(() =>
        scheduleFire(db, { name: s.name, expected: s.nextFireAt, slot: plan.slot, next: plan.next, missed: plan.missed }),
      );
      report.statements++;
      report[result.outcome]++;
    }
    if (due.length < BATCH + failed.size || todo.length === 0) return report;
  }
}
