/**
 * Retention (DESIGN.md §6): finished tasks older than `SLUICE_RETENTION` are deleted in small
 * batches, once a minute (the Worker's cron; a timer on Node), never on the dispatch path.
 */
import type { Config } from '../config.ts';
import type { Queryable } from '../db/db.ts';
import { finishedSweep, rateGrantsSweep } from '../db/retention.ts';
import { withDbRetry } from './retry-db.ts';

/** Finished tasks deleted per statement, and statements per sweep: small enough never to hold anything up. */
const BATCH = 1_000;
const BATCHES = 5;

/** Deletes up to 5,000 finished tasks past the window, and rate-limit grants past theirs; returns how many tasks. */
export async function sweepFinished(db: Queryable, config: Pick<Config, 'retentionMs' | 'maxLeaseMs'>): Promise<number> {
  await withDbRetry(() => rateGrantsSweep(db));
  if (config.retentionMs === null) return 0;
  // Never sooner than a lease can last: a holder repeating `complete` late still gets its answer.
  const keepMs = Math.max(config.retentionMs, config.maxLeaseMs);
  let deleted = 0;
  for (let i = 0; i < BATCHES; i++) {
    const n = await withDbRetry(() => finishedSweep(db, keepMs, BATCH));
    deleted += n;
    if (n < BATCH) break;
  }
  return deleted;
}
