/**
 * Claim passes at a clock the test moves, from the database's own clock (holds, buckets and the
 * due probe are on it): for tests of what the claim decides over time.
 */
import type { Config } from '../../src/config.ts';
import type { LeasedTask } from '../../src/core/types.ts';
import { taskClaimBatch } from '../../src/db/claim.ts';
import type { Queryable } from '../../src/db/db.ts';

/** The database's clock now, in ms. */
export async function dbNowMs(db: Queryable): Promise<number> {
  const [row] = await db.query<{ ms: number }>('select (extract(epoch from now()) * 1000)::float8 as ms');
  return row!.ms;
}

/** One claim pass at `ms` (no cluster cap), with the queues `config` gives. */
export function claimAtMs(db: Queryable, config: Config, ms: number, max = 100): Promise<LeasedTask[]> {
  return taskClaimBatch(db, { max, clusterCap: null, queuesJson: config.claimQueuesJson, now: new Date(ms) });
}

/** A due time long past: every pass finds the task due. */
export const longDue = () => new Date(Date.now() - 60_000);
