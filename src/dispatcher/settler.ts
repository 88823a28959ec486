/**
 * Group commit for lease settlements. A push that finishes while a write is in flight joins
 * the next write, so an idle dispatcher settles each push at once (lowest latency) and a busy
 * one settles many leases per round trip.
 */
import type { Db } from '../db/db.ts';
import { isTransientDbError } from '../db/faults.ts';
import { type LeaseSettlement, leaseSettleReport, type SettleReport } from '../db/settle.ts';
import { nextTurn } from './next-turn.ts';
import { withDbRetry } from './retry-db.ts';
import { systemTimers } from './timers.ts';

interface Waiting {
  item: LeaseSettlement;
  resolve: (held: boolean) => void;
  reject: (error: unknown) => void;
}

export class Settler {
  #queue: Waiting[] = [];
  #writing: Promise<void> | null = null;
  #db: Db;
  #adaptiveQueues: readonly string[];
  /** Round trips spent settling, for the run report. */
  writes = 0;
  /**
   * What the last write said of work waiting for a claim pass (db/settle.ts `SettleReport`);
   * `true` until a write says otherwise, after a failed one, and when the write did not ask.
   */
  workWaits = true;
  #askWorkWaits: () => boolean;
  #now: () => number;

  /**
   * `adaptiveQueues`: the environment's adaptive queues (an override may change any).
   * `askWorkWaits`: whether a write, when it is sent, should find out `workWaits`.
   * `now`: the clock the settlements' due times are decided on (the run's).
   */
  constructor(
    db: Db,
    adaptiveQueues: readonly string[] = [],
    askWorkWaits: () => boolean = () => false,
    now: () => number = systemTimers.now,
  ) {
    this.#db = db;
    this.#adaptiveQueues = adaptiveQueues;
    this.#askWorkWaits = askWorkWaits;
    this.#now = now;
  }

  /** Resolves once written: `true` when the lease was still held, `false` when it was not. */
  settle(item: LeaseSettlement): Promise<boolean> {
    const done = new Promise<boolean>((resolve, reject) => this.#queue.push({ item, resolve, reject }));
    this.#writing ??= this.#drain();
    return done;
  }

  /** Waits until everything handed in so far is written. */
  async flush(): Promise<void> {
    while (this.#writing) await this.#writing;
  }

  async #drain(): Promise<void> {
    // Pushes that end together (the same turn of the event loop) share the first write.
    await nextTurn();
    while (this.#queue.length > 0) {
      const batch = this.#queue.splice(0);
      try {
        const { items, workWaits } = await this.#write(batch, this.#askWorkWaits());
        this.workWaits = workWaits;
        for (const [i, w] of batch.entries()) w.resolve(items[i] !== null);
      } catch (error) {
        this.workWaits = true;
        // A fault that is not passing, and not of one item (a batch is written item by item
        // then): the leases stay as they are; they expire and are settled by the reaper.
        if (batch.length === 1 || isTransientDbError(error)) for (const w of batch) w.reject(error);
        else await this.#oneByOne(batch);
      }
    }
    this.#writing = null;
  }

  /** One write, retried through passing faults: safe, since a replay of a settle is answered as what it did. */
  #write(batch: readonly Waiting[], askWorkWaits: boolean): Promise<SettleReport> {
    this.writes++;
    return withDbRetry(() =>
      leaseSettleReport(
        this.#db,
        batch.map((w) => w.item),
        this.#adaptiveQueues,
        askWorkWaits,
        this.#now(),
      ),
    );
  }

  /** A batch that failed for a reason of its own: each item alone, so that one item fails only itself. */
  async #oneByOne(batch: readonly Waiting[]): Promise<void> {
    for (const w of batch) {
      try {
        const { items } = await this.#write([w], false);
        w.resolve(items[0] !== null);
      } catch (error) {
        w.reject(error);
      }
    }
  }
}
