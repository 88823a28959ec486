/**
 * Cron schedules, pure (docs/guide.md "Schedules"): reading a cron expression in a time zone, the next
 * slot, and the catch-up rule for slots missed while nothing was dispatching. The clock is
 * always passed in. Slots are computed by croner, whose DST rules are kept as they are: in a
 * wall-clock hour that repeats, a fixed-time expression fires once (at the first occurrence) and
 * an interval expression on both; in an hour that is skipped, an interval expression skips it
 * and a fixed-time one fires when the clock has jumped forward.
 */
import { Cron } from 'croner';

/**
 * What a firing does when the task of the schedule's previous firing is unfinished:
 * - `skip`: nothing; the slot is passed over.
 * - `queue`: enqueued, to run once the previous one's run ends: the firings share a
 *   concurrency key of their own (`schedule:<name>`) with a limit of 1.
 * - `allow`: enqueued; firings may run side by side.
 */
export const OVERLAP_POLICIES = ['skip', 'queue', 'allow'] as const;
export type Overlap = (typeof OVERLAP_POLICIES)[number];

/** The concurrency key that the firings of a schedule with `overlap: queue` share. */
export const queueKey = (name: string): string => `schedule:${name}`;

/** Seconds are allowed as a sixth field in front (`*\/10 * * * * *`); years are not. */
const MODE = '5-or-6-parts';

/** The zone's canonical IANA name, or a problem message naming what is wrong. */
export function checkZone(zone: string): { zone: string } | { problem: string } {
  if (/^[+-]\d/.test(zone)) return { problem: 'must be an IANA time zone name such as Europe/Berlin, not a UTC offset' };
  try {
    return { zone: new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone };
  } catch {
    return { problem: `is not an IANA time zone this runtime knows (e.g. UTC, Europe/Berlin, America/New_York)` };
  }
}

/** A cron expression read in a zone (already checked), or the problem with it. */
export function parseCron(expression: string, zone: string): { cron: Cron } | { problem: string } {
  let cron: Cron;
  try {
    // Without a function croner schedules nothing: this object only computes slots.
    cron = new Cron(expression, { timezone: zone, mode: MODE });
  } catch (error) {
    const message = (error as Error).message.replace(/^CronPattern: /, '');
    return { problem: `is not a cron expression Sluice reads (5 fields, or 6 with seconds first): ${message}` };
  }
  if (cron.nextRun(new Date(0)) === null) return { problem: 'never fires (no date matches it)' };
  return { cron };
}

/** The first slot strictly after `after` (to the second), or `null` when there is none. */
export function nextSlot(cron: Cron, after: Date): Date | null {
  return cron.nextRun(after);
}

export interface Firing {
  /** The slot that fires: the latest one at or before now. */
  slot: Date;
  /** Slots between `due` and `slot` that are passed over (the catch-up rule); 0 when on time. */
  missed: number;
  /** The next slot after now, or `null` when the expression never fires again. */
  next: Date | null;
}

/** The most slots counted as missed; beyond it, `missed` says "at least this many". */
export const MISSED_COUNT_CAP = 1_000;

/**
 * The catch-up rule. A schedule due at `due` (its next slot, reached by `now`) fires once, for
 * the latest slot at or before `now`; older slots missed while nothing dispatched (downtime, a
 * lost wake-up) are passed over, counted up to `MISSED_COUNT_CAP`. `null` when not yet due.
 */
export function planFiring(cron: Cron, due: Date, now: Date): Firing | null {
  if (due.getTime() > now.getTime()) return null;
  // croner leaves out a run exactly at the reference, to the second: look from the next second.
  const [latest] = cron.previousRuns(1, new Date(Math.floor(now.getTime() / 1000) * 1000 + 1000));
  const slot = latest && latest.getTime() > due.getTime() ? latest : due;
  let missed = 0;
  if (slot !== due) {
    for (let at: Date | null = due; at && at.getTime() < slot.getTime() && missed < MISSED_COUNT_CAP; at = cron.nextRun(at)) missed++;
  }
  return { slot, missed, next: cron.nextRun(now) };
}
