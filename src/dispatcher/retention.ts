/**
 * Retention (docs/DESIGN.md §10): finished tasks live in history buckets
 * (migrations/0014_history.sql). A sweep opens a new bucket once the open one is an eighth of
 * the retention window old, and drops every bucket closed more than the window ago: a task is
 * gone at most an eighth of the window (plus the time to the next sweep) after it expires,
 * whatever the rate, and dropping a bucket costs the same whatever it holds. Never on the
 * dispatch path: a timer on Node, the cron and the first pusher shard on the Worker.
 */
import type { Config } from '../config.ts';
import { keepMs } from '../core/retention.ts';
import type { Queryable } from '../db/db.ts';
import { debouncesSweep } from '../db/debounce.ts';
import { historySweep, moveStragglers } from '../db/history.ts';
import { lanesSweep, levelsSweep, rateBucketsSweep, rateGrantsSweep } from '../db/retention.ts';
import { withDbRetry } from './retry-db.ts';

/** With no window (kept for ever), buckets still close daily: a closed bucket is counted once for /metrics. */
const FOREVER_WIDTH_MS = 86_400_000;
/** Rows a dispatcher of an earlier version finished in place, moved per sweep. */
const STRAGGLERS = 5_000;

type RetentionConfig = Pick<Config, 'retentionMs' | 'maxLeaseMs'>;

export { keepMs };

/** How long a bucket stays open. */
export function bucketWidthMs(config: RetentionConfig): number {
  const keep = keepMs(config);
  return keep === null ? FOREVER_WIDTH_MS : Math.max(1_000, Math.round(keep / 8));
}

/** How often a dispatcher sweeps: every bucket width, and at least once a minute. */
export function sweepIntervalMs(config: RetentionConfig): number {
  return Math.min(bucketWidthMs(config), 60_000);
}

export interface SweepReport {
  opened: number | null;
  dropped: number[];
  stragglers: number;
}

/** One sweep: rate-limit grants past their period, idle levels, the lanes of idle keys, spent debounces, stragglers, then the buckets. `now`: the sweep's clock (tests). */
export async function sweepFinished(db: Queryable, config: RetentionConfig, now?: Date): Promise<SweepReport> {
  await withDbRetry(() => rateGrantsSweep(db));
  await withDbRetry(() => rateBucketsSweep(db));
  await withDbRetry(() => levelsSweep(db));
  await withDbRetry(() => lanesSweep(db, now ? { now } : {}));
  await withDbRetry(() => debouncesSweep(db));
  const stragglers = await withDbRetry(() => moveStragglers(db, STRAGGLERS));
  const { opened, dropped } = await withDbRetry(() => historySweep(db, bucketWidthMs(config), keepMs(config), now));
  return { opened, dropped, stragglers };
}
