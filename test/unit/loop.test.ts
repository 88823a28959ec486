/** The Node dispatch loop, on a clock the test moves: it sleeps until the next due time. */
import { describe, expect, it } from 'vitest';
import { DispatchLoop } from '../../src/dispatcher/loop.ts';
import { emptyReport, type RunReport } from '../../src/dispatcher/report.ts';
import { DUE_EVENT } from '../../src/dispatcher/run-options.ts';
import { flush, manualTimers } from '../helpers/timers.ts';

function report(over: Partial<RunReport>): RunReport {
  return { ...emptyReport(), ...over };
}

/** A run function whose reports the test scripts, recording when each run started. */
function scriptedRuns(clock: ReturnType<typeof manualTimers>, reports: Array<Partial<RunReport>>) {
  const started: number[] = [];
  const run = async () => {
    started.push(clock.timers.now());
    return report(reports.shift() ?? {});
  };
  return { run, started };
}

describe('DispatchLoop', () => {
  it('runs at start, then sleeps until the next due time — not a fixed tick', async () => {
    const clock = manualTimers();
    const { run, started } = scriptedRuns(clock, [{ nextDueInMs: 200 }, { nextDueInMs: 1_500 }, {}]);
    const loop = new DispatchLoop(run, { maxSleepMs: 60_000, timers: clock.timers });
    loop.start();
    await flush();
    expect(started).toEqual([0]);
    expect(clock.nextAt()).toBe(200);
    await clock.advance(199);
    expect(started).toEqual([0]);
    await clock.advance(1);
    expect(started).toEqual([0, 200]);
    await clock.advance(1_500);
    expect(started).toEqual([0, 200, 1_700]);
    // Nothing waits on time: only the fallback poll remains.
    expect(clock.nextAt()).toBe(61_700);
    await loop.stop();
  });

  it('at rest, makes no fallback poll: only a wake-up or a due time runs it', async () => {
    const clock = manualTimers();
    const { run, started } = scriptedRuns(clock, [{}, {}, { nextDueInMs: 5_000 }, {}]);
    let resting = false;
    const loop = new DispatchLoop(run, { maxSleepMs: 30_000, timers: clock.timers, resting: () => resting });
    loop.start();
    await flush();
    expect(clock.nextAt()).toBe(30_000);
    resting = true;
    await clock.advance(30_000);
    expect(started).toEqual([0, 30_000]);
    expect(clock.nextAt()).toBe(Number.POSITIVE_INFINITY);
    await clock.advance(3_600_000);
    expect(started).toEqual([0, 30_000]);
    // A poke runs it; a due time it reads still wakes it.
    loop.wake();
    await flush();
    expect(started).toEqual([0, 30_000, 3_630_000]);
    expect(clock.nextAt()).toBe(3_635_000);
    await loop.stop();
  });

  it('runs again at once when a run stopped with work left', async () => {
    const clock = manualTimers();
    const { run, started } = scriptedRuns(clock, [{ more: true }, { more: true }, {}]);
    const loop = new DispatchLoop(run, { maxSleepMs: 60_000, timers: clock.timers });
    loop.start();
    await flush();
    await flush();
    expect(started).toEqual([0, 0, 0]);
    await loop.stop();
  });

  it('a poke wakes it early; a poke for later only moves the timer earlier', async () => {
    const clock = manualTimers();
    const { run, started } = scriptedRuns(clock, [{ nextDueInMs: 10_000 }, {}, {}]);
    const loop = new DispatchLoop(run, { maxSleepMs: 60_000, timers: clock.timers });
    loop.start();
    await flush();
    loop.wake(3_000);
    expect(clock.nextAt()).toBe(3_000);
    loop.wake(5_000);
    expect(clock.nextAt()).toBe(3_000);
    await clock.advance(3_000);
    expect(started).toEqual([0, 3_000]);
    await clock.advance(100);
    loop.wake();
    await flush();
    expect(started).toEqual([0, 3_000, 3_100]);
    await loop.stop();
  });

  it('a poke during a run nudges that run and makes another follow it', async () => {
    const clock = manualTimers();
    let release: () => void = () => {};
    const nudges: number[] = [];
    let runs = 0;
    const loop = new DispatchLoop(
      async (_signal, target) => {
        runs++;
        if (runs === 1) {
          target.addEventListener(DUE_EVENT, () => nudges.push(clock.timers.now()));
          await new Promise<void>((r) => {
            release = r;
          });
        }
        return report({});
      },
      { maxSleepMs: 60_000, timers: clock.timers },
    );
    loop.start();
    await flush();
    loop.wake();
    expect(nudges).toEqual([0]);
    release();
    await flush();
    await flush();
    expect(runs).toBe(2);
    await loop.stop();
  });

  it('does not spin on work that reads due now but is never claimed', async () => {
    const clock = manualTimers();
    const { run, started } = scriptedRuns(clock, [
      { nextDueInMs: 0 },
      { nextDueInMs: 0 },
      { nextDueInMs: 0 },
      { nextDueInMs: 0, claimed: 1 },
      {},
    ]);
    const loop = new DispatchLoop(run, { maxSleepMs: 60_000, timers: clock.timers });
    loop.start();
    await flush();
    expect(started).toEqual([0]);
    await clock.advance(50);
    await clock.advance(100);
    await clock.advance(200);
    // The fourth run claimed something: no longer a stall, so the fifth ran at once.
    expect(started).toEqual([0, 50, 150, 350, 350]);
    await loop.stop();
  });

  it('backs off after a failed run instead of spinning', async () => {
    const clock = manualTimers();
    const errors: unknown[] = [];
    let runs = 0;
    const loop = new DispatchLoop(
      async () => {
        runs++;
        if (runs <= 3) throw new Error('database down');
        return report({});
      },
      { maxSleepMs: 60_000, errorBackoffMs: 100, timers: clock.timers, onError: (e) => errors.push(e) },
    );
    loop.start();
    await flush();
    expect(clock.nextAt()).toBe(100);
    await clock.advance(100);
    expect(clock.nextAt()).toBe(300);
    await clock.advance(200);
    expect(clock.nextAt()).toBe(700);
    await clock.advance(400);
    expect(runs).toBe(4);
    expect(errors).toHaveLength(3);
    await loop.stop();
  });

  it('stop aborts claiming and waits for the run in progress', async () => {
    const clock = manualTimers();
    let finished = false;
    const loop = new DispatchLoop(
      async (signal) => {
        await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
        finished = true;
        return report({});
      },
      { maxSleepMs: 60_000, timers: clock.timers },
    );
    loop.start();
    await flush();
    await loop.stop();
    expect(finished).toBe(true);
    loop.wake();
    await flush();
    expect(clock.nextAt()).toBe(Number.POSITIVE_INFINITY);
  });
});
