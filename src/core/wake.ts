/**
 * When dispatch should wake, and how widely (docs/DESIGN.md §6). Pure: the clock is passed in.
 * Dispatch is driven by the next due time, never by a fixed tick: an event that makes work
 * due now (an enqueue, a lease end, a limit change) is a `Poke`, and every dispatch run ends
 * by reading when the next thing comes due.
 */
import { doublingBackoffMs } from './retry.ts';

/** Something became due: `atMs` (epoch ms; now or later), and how many tasks it concerns. */
export interface Poke {
  atMs: number;
  /** Tasks that come due then; 1 for an event that frees one slot; 0 when unknown. */
  tasks: number;
  /** The queues of those tasks (an enqueue's); absent: any queue (a slot freed, a limit changed). */
  queues?: readonly string[];
}

/** A poke for work that is due now (a lease ended, a limit changed, a task was redriven). */
export const pokeNow = (nowMs: number, tasks = 1): Poke => ({ atMs: nowMs, tasks });

/**
 * The poke a lease's end makes: its slot is free now. Without a cluster cap only its own queue
 * (its queue's limit, its key's) can use that slot, so only that queue's waiting pulls wake;
 * under a cap any queue may.
 */
export const pokeLeaseEnded = (nowMs: number, queue: string, clusterCap: number | null): Poke =>
  clusterCap === null ? { atMs: nowMs, tasks: 1, queues: [queue] } : pokeNow(nowMs);

/**
 * The poke an enqueue makes: due at the earliest `run_at` among the new tasks. A task's
 * `run_at` and `created_at` are both the database's instants; what travels is the wait between
 * them, from `nowMs` (this process's clock), so a clock off the database's wakes dispatch on
 * time all the same (an instant compared with our clock would wake it the skew late).
 */
export function pokeForTasks(tasks: readonly { queue: string; runAt: Date; createdAt: Date }[], nowMs: number): Poke | null {
  if (tasks.length === 0) return null;
  const waits = tasks.map((t) => Math.max(0, t.runAt.getTime() - t.createdAt.getTime()));
  const wait = Math.min(...waits);
  const due = tasks.filter((_, i) => waits[i]! <= wait);
  return { atMs: nowMs + wait, tasks: due.length, queues: [...new Set(due.map((t) => t.queue))] };
}

/**
 * Pull consumers waiting for work (POST /v1/queues/:queue/lease, docs/DESIGN.md §6): each waits
 * until a poke for now concerns its queue (an enqueue into it, or an event of any queue: a
 * lease ended, a limit changed), or until its time is up. It then claims again; a wake-up
 * that finds nothing costs one claim pass. The Node server holds one in its process, the
 * Worker's scheduler one in its Durable Object, which every poke reaches.
 */
export class WorkWaiters {
  #waiting = new Set<{ queue: string; done: () => void }>();

  /** Resolves at the first poke for `queue`, or after `ms`. */
  wait(queue: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const waiter = {
        queue,
        done: () => {
          clearTimeout(timer);
          this.#waiting.delete(waiter);
          resolve();
        },
      };
      const timer = setTimeout(waiter.done, Math.max(0, ms));
      this.#waiting.add(waiter);
    });
  }

  /** Wakes the waiters a poke concerns, when its work is due now (later work wakes no one yet). */
  wake(poke: Poke, nowMs: number): void {
    if (poke.atMs > nowMs) return;
    for (const waiter of [...this.#waiting]) if (!poke.queues || poke.queues.includes(waiter.queue)) waiter.done();
  }

  /** Wakes every waiter (work came due by time: the scheduler's alarm). */
  wakeAll(): void {
    for (const waiter of [...this.#waiting]) waiter.done();
  }

  get size(): number {
    return this.#waiting.size;
  }
}

/** What a dispatch run reports about when to wake. */
export interface WakeReport {
  /** Stopped for its budget with work left. */
  more: boolean;
  /** Ms until the next due time; `null` = nothing waits on time. */
  nextDueInMs: number | null;
  claimed: number;
}

/**
 * A run that claimed nothing and yet reads work due now: normally a task that came due between
 * its last claim and its probe (the next run takes it), but work that cannot be settled (an
 * expired lease whose settle keeps failing) would read the same forever. Consecutive stalls
 * back off, so that case never spins.
 */
export const isStall = (report: WakeReport): boolean => !report.more && report.nextDueInMs === 0 && report.claimed === 0;

/** The least sleep after `stalls` stalls in a row: 50 ms, doubling, at most 30 s. */
export const stallDelayMs = (stalls: number): number => (stalls <= 0 ? 0 : doublingBackoffMs(stalls, 50, 30_000));

/**
 * The epoch time to wake at after a run: infinite = nothing is due (sleep until poked, or at
 * most `maxSleepMs` where a fallback poll is wanted). A run that stopped with work left
 * (`more`) wakes at once; after `stalls` stalls in a row, not before their delay.
 */
export function wakeAt(report: WakeReport, nowMs: number, maxSleepMs = Number.POSITIVE_INFINITY, stalls = 0): number {
  if (report.more) return nowMs;
  const sleep = Math.min(report.nextDueInMs ?? Number.POSITIVE_INFINITY, maxSleepMs);
  return nowMs + Math.max(0, sleep, stallDelayMs(stalls));
}

/**
 * How many pusher shards a wake-up starts: enough for the announced tasks at `parallelism`
 * pushes per shard, at least one, at most `shards`. Backlog nobody announced (delayed tasks
 * coming due together) is found by the claims themselves: a shard whose pass fills every
 * place wakes the next shard (`nextShard`).
 */
export function shardsToWake(announcedTasks: number, parallelism: number, shards: number): number {
  return Math.min(shards, Math.max(1, Math.ceil(announcedTasks / parallelism)));
}

/**
 * The shard a busy shard recruits: the next one, the last recruiting the first. Shards stop on
 * their own when they find nothing (an adaptive limit was cut), so the busy ones need not begin
 * at shard 0: a last shard that never recruited kept a queue at its six places while its learnt
 * limit allowed four shards' (docs/performance.md). A shard recruited while it drains already
 * just claims again.
 */
export function nextShard(index: number, shards: number): number | null {
  return shards > 1 ? (index + 1) % shards : null;
}
