/** When a deployment rests (src/core/rest.ts), on a clock the test moves. */
import { describe, expect, it } from 'vitest';
import { atRest, RestClock } from '../../src/core/rest.ts';

describe('atRest', () => {
  it('rests only past the quiet time, with nothing due or only due later', () => {
    const quiet = { lastWorkMs: 0, nextDueAtMs: null };
    expect(atRest(quiet, 119_999, 120_000)).toBe(false);
    expect(atRest(quiet, 120_000, 120_000)).toBe(true);
    // A due time ahead wakes dispatch when it comes: no need to touch Postgres before.
    expect(atRest({ lastWorkMs: 0, nextDueAtMs: 500_000 }, 200_000, 120_000)).toBe(true);
    // One that has passed unserved means a wake-up was lost: not at rest.
    expect(atRest({ lastWorkMs: 0, nextDueAtMs: 150_000 }, 200_000, 120_000)).toBe(false);
    expect(atRest({ lastWorkMs: 0, nextDueAtMs: 200_000 }, 200_000, 120_000)).toBe(false);
  });
});

describe('RestClock', () => {
  it('assumes work at start, rests after the quiet time, and wakes its listeners once on work', () => {
    let now = 1_000;
    const rest = new RestClock(60_000, () => now);
    expect(rest.resting()).toBe(false);
    now += 60_000;
    expect(rest.resting()).toBe(true);
    let woken = 0;
    const stop = rest.onWake(() => woken++);
    rest.worked();
    rest.worked();
    expect([rest.resting(), woken]).toEqual([false, 1]);
    rest.due(now + 1_000);
    now += 60_000;
    // Its due time passed unserved.
    expect(rest.resting()).toBe(false);
    rest.due(null);
    expect(rest.resting()).toBe(true);
    stop();
    rest.worked();
    expect(woken).toBe(1);
  });
});
