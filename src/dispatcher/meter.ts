/**
 * What a dispatcher counts for /metrics, added up in memory and written in one statement
 * (db/metrics.ts): per run on the Worker, at most once a second on Node. Never one write per
 * task. A write that fails before it ran is kept for the next; one whose fate is unknown is
 * dropped rather than risk counting twice.
 */
import { bucketOf, type CountedId } from '../core/metrics.ts';
import type { Queryable } from '../db/db.ts';
import { isNotStarted } from '../db/faults.ts';
import { type CounterRow, countersAdd } from '../db/metrics.ts';

export class Meter {
  #rows = new Map<string, CounterRow>();
  /** Pushes per endpoint origin since the last write. */
  #origins = new Map<string, number>();
  #lastWrite = Number.NEGATIVE_INFINITY;
  #writing: Promise<void> | null = null;

  add(metric: CountedId, queue = '', label = '', n = 1): void {
    const id = `${metric}\u0000${queue}\u0000${label}`;
    const row = this.#rows.get(id);
    if (row) row.value += n;
    else this.#rows.set(id, { metric, queue, label, value: n });
  }

  /** A push to `url` was made (whatever its answer): an attempt of its origin (0027_endpoints.sql). */
  attempt(url: string, n = 1): void {
    const origin = URL.canParse(url) ? new URL(url).origin : null;
    if (origin === null || origin === 'null') return;
    this.#origins.set(origin, (this.#origins.get(origin) ?? 0) + n);
  }

  /** One observation of a histogram: its bucket, its sum and its count. */
  observe(metric: CountedId, queue: string, seconds: number): void {
    const value = Math.max(0, seconds);
    this.add(metric, queue, bucketOf(value));
    this.add(metric, queue, 'sum', value);
    this.add(metric, queue, 'count');
  }

  /**
   * Writes what was counted, unless the last write was less than `minIntervalMs` ago (`now`
   * in ms). Never throws: metrics must not fail a dispatcher run.
   */
  async write(db: Queryable, options: { now: number; minIntervalMs?: number }): Promise<void> {
    const now = options.now;
    if (now - this.#lastWrite < (options.minIntervalMs ?? 0)) return;
    // One write at a time: rows counted meanwhile wait for the next.
    if (this.#writing) return this.#writing;
    if (this.#rows.size === 0 && this.#origins.size === 0) return;
    this.#lastWrite = now;
    const rows = [...this.#rows.values()];
    const origins = [...this.#origins].map(([origin, attempts]) => ({ origin, attempts }));
    this.#rows.clear();
    this.#origins.clear();
    this.#writing = countersAdd(db, rows, origins)
      .catch((error: unknown) => {
        if (isNotStarted(error)) {
          for (const r of rows) this.add(r.metric as CountedId, r.queue, r.label, r.value);
          for (const o of origins) this.#origins.set(o.origin, (this.#origins.get(o.origin) ?? 0) + o.attempts);
        } else console.warn('sluice: writing metrics failed; this batch of counts is dropped', error);
      })
      .finally(() => {
        this.#writing = null;
      });
    return this.#writing;
  }
}
