/** The run's watch on the next due time (src/dispatcher/due-watch.ts), on a clock the test moves. */
import { describe, expect, it } from 'vitest';
import { DueWatch, PROBE_GAP_MS } from '../../src/dispatcher/due-watch.ts';
import { manualTimers } from '../helpers/timers.ts';

function watchWith(answers: Array<number | null | Error>, waiting = () => true) {
  const clock = manualTimers(1_000);
  const events: string[] = [];
  let reads = 0;
  const watch = new DueWatch({
    timers: clock.timers,
    probe: async () => {
      const answer = answers[reads++];
      if (answer instanceof Error) throw answer;
      return answer ?? null;
    },
    onDue: () => events.push(`due@${clock.timers.now()}`),
    onReadEnd: () => events.push('read'),
    waiting,
    log: { warn: (message: string) => events.push(`warn: ${message}`) },
  });
  return { clock, events, watch, reads: () => reads };
}

describe('DueWatch', () => {
  it('reads the next due time and wakes the run when it comes', async () => {
    const { clock, events, watch } = watchWith([300]);
    watch.arm();
    expect(watch.reading).toBe(true);
    await watch.settled();
    expect(watch.reading).toBe(false);
    await clock.advance(299);
    expect(events).toEqual(['read']);
    await clock.advance(1);
    expect(events).toEqual(['read', 'due@1300']);
    expect(watch.reads).toBe(1);
  });

  it('reads once while a read or a wake-up is pending', async () => {
    const { watch, reads } = watchWith([5_000]);
    watch.arm();
    watch.arm();
    await watch.settled();
    watch.arm();
    expect(reads()).toBe(1);
  });

  it('reads at most once per gap, and after the gap only if the run still waits', async () => {
    let waiting = true;
    const { clock, watch, reads } = watchWith([null, null, null], () => waiting);
    watch.arm();
    await watch.settled();
    watch.arm(); // too soon: postponed to the end of the gap
    expect(reads()).toBe(1);
    await clock.advance(PROBE_GAP_MS);
    expect(reads()).toBe(2);
    await watch.settled();
    watch.arm();
    waiting = false;
    await clock.advance(PROBE_GAP_MS);
    expect(reads()).toBe(2);
  });

  it('wakes nobody once stopped', async () => {
    const { clock, events, watch } = watchWith([100]);
    watch.arm();
    await watch.settled();
    watch.stop();
    await clock.advance(1_000);
    expect(events).toEqual(['read']);
    expect(clock.pending.size).toBe(0);
  });

  it('says when a read fails, and reads again later', async () => {
    const { clock, events, watch, reads } = watchWith([new Error('down'), 50]);
    watch.arm();
    await watch.settled();
    expect(events).toEqual(['warn: sluice: reading the next due time failed', 'read']);
    await clock.advance(PROBE_GAP_MS);
    watch.arm();
    await watch.settled();
    await clock.advance(50);
    expect(reads()).toBe(2);
    expect(events.at(-1)).toBe(`due@${1_000 + PROBE_GAP_MS + 50}`);
  });
});
