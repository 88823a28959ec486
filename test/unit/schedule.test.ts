/** Cron schedules, pure (src/core/schedule.ts): reading, zones, the next slot, the catch-up rule, DST. */
import type { Cron } from 'croner';
import { describe, expect, it } from 'vitest';
import { checkZone, MISSED_COUNT_CAP, nextSlot, parseCron, planFiring } from '../../src/core/schedule.ts';

const at = (iso: string) => new Date(iso);
function cron(expression: string, zone = 'UTC'): Cron {
  const parsed = parseCron(expression, zone);
  if (!('cron' in parsed)) throw new Error(parsed.problem);
  return parsed.cron;
}
/** Slots from `from` (exclusive), walking forward as a dispatcher that fires every slot would. */
function slots(c: Cron, from: string, n: number): string[] {
  const out: string[] = [];
  for (let s = nextSlot(c, at(from)); s && out.length < n; s = nextSlot(c, s)) out.push(s.toISOString());
  return out;
}

describe('parseCron', () => {
  it('reads 5 fields, 6 with seconds first, and nicknames', () => {
    expect(slots(cron('*/15 * * * *'), '2026-01-01T10:07:00Z', 2)).toEqual(['2026-01-01T10:15:00.000Z', '2026-01-01T10:30:00.000Z']);
    expect(slots(cron('*/20 * * * * *'), '2026-01-01T10:07:00Z', 2)).toEqual(['2026-01-01T10:07:20.000Z', '2026-01-01T10:07:40.000Z']);
    expect(slots(cron('@daily', 'Europe/Berlin'), '2026-01-01T10:00:00Z', 1)).toEqual(['2026-01-01T23:00:00.000Z']);
  });

  it('names the problem of an expression it cannot read, or one that never fires', () => {
    const problem = (e: string) => {
      const parsed = parseCron(e, 'UTC');
      return 'problem' in parsed ? parsed.problem : null;
    };
    expect(problem('* * *')).toMatch(/5 fields, or 6 with seconds first.*five, six, or seven/);
    expect(problem('61 * * * *')).toMatch(/Invalid value for minute: 61/);
    expect(problem('0 0 0 1 1 * 2030')).toMatch(/requires exactly 5 or 6 parts/);
    expect(problem('0 0 30 2 *')).toBe('never fires (no date matches it)');
    expect(problem('0 3 * * *')).toBeNull();
  });
});

describe('checkZone', () => {
  it('gives the canonical IANA name, and refuses offsets and unknown zones', () => {
    expect(checkZone('utc')).toEqual({ zone: 'UTC' });
    expect(checkZone('Europe/Berlin')).toEqual({ zone: 'Europe/Berlin' });
    expect(checkZone('+02:00')).toEqual({ problem: expect.stringMatching(/not a UTC offset/) });
    expect(checkZone('Mars/Olympus_Mons')).toEqual({ problem: expect.stringMatching(/not an IANA time zone/) });
  });
});

describe('planFiring: the catch-up rule', () => {
  const every5 = cron('*/5 * * * *');

  it('fires the slot that is due, on time, and names the next', () => {
    expect(planFiring(every5, at('2026-01-01T10:05:00Z'), at('2026-01-01T10:05:00.200Z'))).toEqual({
      slot: at('2026-01-01T10:05:00Z'),
      missed: 0,
      next: at('2026-01-01T10:10:00Z'),
    });
  });

  it('is not due before its slot', () => {
    expect(planFiring(every5, at('2026-01-01T10:05:00Z'), at('2026-01-01T10:04:59.999Z'))).toBeNull();
  });

  it('after downtime fires only the latest missed slot, and counts the older ones as missed', () => {
    // Due at 10:05; nothing dispatched until 11:02:30: 10:05 … 10:55 passed over, 11:00 fires.
    expect(planFiring(every5, at('2026-01-01T10:05:00Z'), at('2026-01-01T11:02:30Z'))).toEqual({
      slot: at('2026-01-01T11:00:00Z'),
      missed: 11,
      next: at('2026-01-01T11:05:00Z'),
    });
  });

  it('fires a slot reached exactly, to the millisecond', () => {
    expect(planFiring(every5, at('2026-01-01T10:05:00Z'), at('2026-01-01T10:10:00Z'))).toMatchObject({
      slot: at('2026-01-01T10:10:00Z'),
      missed: 1,
      next: at('2026-01-01T10:15:00Z'),
    });
  });

  it('counts missed slots only up to a cap (a year of a per-second schedule is not walked)', () => {
    const everySecond = cron('* * * * * *');
    const plan = planFiring(everySecond, at('2025-01-01T00:00:00Z'), at('2026-01-01T00:00:00.500Z'));
    expect(plan).toEqual({ slot: at('2026-01-01T00:00:00Z'), missed: MISSED_COUNT_CAP, next: at('2026-01-01T00:00:01Z') });
  });
});

describe('time zones across DST changes (Europe/Berlin: 2025-10-26 03:00 → 02:00, 2026-03-29 02:00 → 03:00)', () => {
  it('a fixed wall time that repeats fires once, at its first occurrence', () => {
    expect(slots(cron('30 2 * * *', 'Europe/Berlin'), '2025-10-25T12:00:00Z', 2)).toEqual([
      '2025-10-26T00:30:00.000Z', // 02:30 CEST; 02:30 CET an hour later does not fire
      '2025-10-27T01:30:00.000Z',
    ]);
  });

  it('an interval schedule fires in both passes of the repeated hour', () => {
    expect(slots(cron('30 * * * *', 'Europe/Berlin'), '2025-10-25T23:45:00Z', 3)).toEqual([
      '2025-10-26T00:30:00.000Z', // 02:30 CEST
      '2025-10-26T01:30:00.000Z', // 02:30 CET
      '2025-10-26T02:30:00.000Z', // 03:30 CET
    ]);
  });

  it('a fixed wall time that is skipped fires when the clock has jumped; an interval skips the hour', () => {
    expect(slots(cron('30 2 * * *', 'Europe/Berlin'), '2026-03-28T12:00:00Z', 2)).toEqual([
      '2026-03-29T01:00:00.000Z', // 03:00 CEST, the first minute after the jump
      '2026-03-30T00:30:00.000Z',
    ]);
    expect(slots(cron('30 * * * *', 'Europe/Berlin'), '2026-03-28T23:45:00Z', 2)).toEqual([
      '2026-03-29T00:30:00.000Z', // 01:30 CET; 02:30 does not exist
      '2026-03-29T01:30:00.000Z', // 03:30 CEST
    ]);
  });

  it('the catch-up slot across a repeated hour is one the forward walk would have fired', () => {
    // Everything between 2025-10-25 22:00Z and each moment: the latest slot equals the walk's last.
    const c = cron('*/20 * * * *', 'Europe/Berlin');
    const all = slots(c, '2025-10-25T21:59:00Z', 30);
    for (let m = 0; m < 6 * 60; m += 7) {
      const now = new Date(Date.parse('2025-10-25T22:00:00Z') + m * 60_000 + 13_000);
      const walked = all.filter((s) => Date.parse(s) <= now.getTime());
      const plan = planFiring(c, at(walked[0]!), now);
      expect(plan?.slot.toISOString()).toBe(walked.at(-1));
      expect(plan?.missed).toBe(walked.length - 1);
    }
  });
});
