/** One claim pass: a single round trip to `sluice.claim` (migrations/functions/claim.sql). */
import type { LeasedTask } from '../core/types.ts';
import { prepared, type Queryable } from './db.ts';
import { TASK_ROW_COLUMNS, type TaskRow, toTask } from './rows.ts';

/**
 * Prepared once per connection: parsing and planning the call itself (the function returns
 * the task table's row type, whose descriptor Postgres copies with every default and check at
 * each step) cost 0.1 ms of a 0.7-0.8 ms pass of one. Its columns are named, as a prepared
 * statement's must be, and are only those a task is read from.
 */
const CLAIM = prepared('claim', `select ${TASK_ROW_COLUMNS.join(', ')} from sluice.claim($1, $2, $3::jsonb, $4, $5)`);

export interface ClaimLimits {
  /** Most tasks to lease in this pass. */
  max: number;
  /** Leased tasks allowed across all queues; `null` = no cap. */
  clusterCap: number | null;
  /** The environment's claim-time queue settings, JSON (see `claimQueuesJson`). */
  queuesJson: string;
  /** The pass's clock; default the database's (tests move time by passing one). */
  now?: Date;
  /** A pulled queue to claim from (a consumer's pull); absent: the pushed queues (the dispatcher). */
  pull?: string;
}

/**
 * Leases up to `max` ready tasks within every limit, best first and round-robin across keys;
 * each claim counts the attempt it starts.
 */
export async function taskClaimBatch(db: Queryable, limits: ClaimLimits): Promise<LeasedTask[]> {
  if (limits.max <= 0) return [];
  const rows = await db.query<TaskRow>(CLAIM, [limits.max, limits.clusterCap, limits.queuesJson, limits.now ?? null, limits.pull ?? null]);
  return rows.map((r) => toTask(r) as LeasedTask);
}
