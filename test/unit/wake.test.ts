import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { isStall, nextShard, pokeForTasks, pokeLeaseEnded, shardsToWake, stallDelayMs, WorkWaiters, wakeAt } from '../../src/core/wake.ts';
import { parseWakeMessage } from '../../src/db/wake.ts';

describe('pokeForTasks', () => {
  const now = 1_000_000;
  /** A task written at `now` on the database's clock, due `inMs` later. */
  const task = (inMs: number, dbNow = now, queue = 'q') => ({ queue, runAt: new Date(dbNow + inMs), createdAt: new Date(dbNow) });
  it('is due at the earliest run_at, never before now, counting the tasks due then and naming their queues', () => {
    expect(pokeForTasks([task(-5, now, 'a'), task(0, now, 'b'), task(0, now, 'a'), task(10, now, 'c')], now)).toEqual({
      atMs: now,
      tasks: 3,
      queues: ['a', 'b'],
    });
    expect(pokeForTasks([task(2_000), task(500)], now)).toEqual({ atMs: now + 500, tasks: 1, queues: ['q'] });
  });
  it("wakes on time whatever the database's clock says: the wait travels, not the instant", () => {
    for (const skew of [-30_000, 30_000]) {
      expect(pokeForTasks([task(0, now + skew)], now)).toMatchObject({ atMs: now, tasks: 1 });
      expect(pokeForTasks([task(2_000, now + skew)], now)).toMatchObject({ atMs: now + 2_000, tasks: 1 });
    }
  });
  it('is nothing when nothing was written', () => {
    expect(pokeForTasks([], now)).toBeNull();
  });
});

describe('wakeAt', () => {
  it('wakes at once when the run stopped with work left', () => {
    expect(wakeAt({ more: true, nextDueInMs: 5_000, claimed: 0 }, 100)).toBe(100);
  });
  it('wakes at the next due time, at most maxSleepMs away', () => {
    expect(wakeAt({ more: false, nextDueInMs: 250, claimed: 0 }, 100)).toBe(350);
    expect(wakeAt({ more: false, nextDueInMs: 90_000, claimed: 0 }, 100, 30_000)).toBe(30_100);
  });
  it('sleeps until poked when nothing waits on time (or until the fallback)', () => {
    expect(wakeAt({ more: false, nextDueInMs: null, claimed: 0 }, 100)).toBe(Number.POSITIVE_INFINITY);
    expect(wakeAt({ more: false, nextDueInMs: null, claimed: 0 }, 100, 30_000)).toBe(30_100);
  });
});

describe('stalls', () => {
  it('a run that claimed nothing yet reads work due now is a stall', () => {
    expect(isStall({ more: false, nextDueInMs: 0, claimed: 0 })).toBe(true);
    expect(isStall({ more: false, nextDueInMs: 0, claimed: 3 })).toBe(false);
    expect(isStall({ more: false, nextDueInMs: 20, claimed: 0 })).toBe(false);
    expect(isStall({ more: true, nextDueInMs: null, claimed: 0 })).toBe(false);
  });
  it('stalls in a row back off from 50 ms, doubling, to at most 30 s', () => {
    expect([0, 1, 2, 3, 10, 40].map(stallDelayMs)).toEqual([0, 50, 100, 200, 25_600, 30_000]);
    expect(wakeAt({ more: false, nextDueInMs: 0, claimed: 0 }, 100, 60_000, 3)).toBe(300);
    // A later due time wins over the stall's delay.
    expect(wakeAt({ more: false, nextDueInMs: 5_000, claimed: 0 }, 100, 60_000, 3)).toBe(5_100);
  });
});

describe('shards', () => {
  it('wakes enough shards for the announced tasks, at least one, at most the configured number', () => {
    expect(shardsToWake(0, 6, 8)).toBe(1);
    expect(shardsToWake(6, 6, 8)).toBe(1);
    expect(shardsToWake(7, 6, 8)).toBe(2);
    expect(shardsToWake(2_000, 6, 8)).toBe(8);
    fc.assert(
      fc.property(fc.nat(100_000), fc.integer({ min: 1, max: 1_000 }), fc.integer({ min: 1, max: 256 }), (tasks, parallelism, shards) => {
        const n = shardsToWake(tasks, parallelism, shards);
        return n >= 1 && n <= shards && (n === shards || n * parallelism >= tasks);
      }),
    );
  });
  it('recruits the next shard, the last the first, never itself', () => {
    expect([0, 1, 2, 3].map((i) => nextShard(i, 4))).toEqual([1, 2, 3, 0]);
    expect(nextShard(0, 1)).toBeNull();
  });
});

describe('WorkWaiters', () => {
  it("wakes a queue's waiters on a poke for now naming it or naming none, never on later work", async () => {
    vi.useFakeTimers();
    try {
      const waiters = new WorkWaiters();
      const woke: string[] = [];
      const wait = (queue: string, tag: string) => void waiters.wait(queue, 10_000).then(() => woke.push(tag));
      wait('a', 'a1');
      wait('b', 'b1');
      waiters.wake({ atMs: 2_000, tasks: 1, queues: ['a'] }, 1_000);
      await vi.advanceTimersByTimeAsync(0);
      expect(woke).toEqual([]);
      waiters.wake({ atMs: 1_000, tasks: 1, queues: ['a'] }, 1_000);
      await vi.advanceTimersByTimeAsync(0);
      expect(woke).toEqual(['a1']);
      wait('a', 'a2');
      waiters.wake({ atMs: 1_000, tasks: 1 }, 1_000);
      await vi.advanceTimersByTimeAsync(0);
      expect(woke.sort()).toEqual(['a1', 'a2', 'b1']);
      expect(waiters.size).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
  it('lets a waiter go when its time is up', async () => {
    vi.useFakeTimers();
    try {
      const waiters = new WorkWaiters();
      let done = false;
      void waiters.wait('a', 500).then(() => {
        done = true;
      });
      await vi.advanceTimersByTimeAsync(499);
      expect(done).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      expect(done).toBe(true);
      expect(waiters.size).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('a lease that ends', () => {
  it('wakes only its own queue without a cluster cap, every queue under one', () => {
    expect(pokeLeaseEnded(1_000, 'mail', null)).toEqual({ atMs: 1_000, tasks: 1, queues: ['mail'] });
    expect(pokeLeaseEnded(1_000, 'mail', 8)).toEqual({ atMs: 1_000, tasks: 1 });
  });
});

describe('wake messages between instances', () => {
  it('carry the queues a poke names, and refuse what is not a list of names', () => {
    expect(parseWakeMessage(JSON.stringify({ from: 'x', inMs: 0, tasks: 1, queues: ['a'] }))).toEqual({
      from: 'x',
      inMs: 0,
      tasks: 1,
      queues: ['a'],
    });
    expect(parseWakeMessage(JSON.stringify({ from: 'x', inMs: 0, tasks: 1 }))).toEqual({ from: 'x', inMs: 0, tasks: 1 });
    expect(parseWakeMessage(JSON.stringify({ from: 'x', inMs: 0, tasks: 1, queues: [1] }))).toBeNull();
    expect(parseWakeMessage(JSON.stringify({ from: 'x', inMs: 0, tasks: 1, queues: 'a' }))).toBeNull();
  });
});
