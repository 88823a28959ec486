/** The tasks table's row, and its mapping to the domain `Task`. */

/** The content type most tasks have: a row leaves it out (migrations/0014_history.sql). */
export const DEFAULT_CONTENT_TYPE = 'application/json';

import { type Backoff, type HttpMethod, type Task, type TaskStatus, UNFINISHED_STATUSES } from '../core/types.ts';

/**
 * The unfinished statuses as an SQL list, `('pending', 'leased', 'waiting')`, for `status in …`.
 * The same text as the partial indexes' predicates (0014_history.sql), which the planner matches,
 * and as the living SQL functions' lists (test/unit/schema.test.ts holds them to it).
 */
export const UNFINISHED_SQL = `(${UNFINISHED_STATUSES.map((s) => `'${s}'`).join(', ')})`;

/**
 * "`alias` is leased", for a statement that finds a task by its id: checked row by row, never
 * searched for. `is not distinct from` means `=` here (the status is never null), but no index on
 * leased tasks serves it. Written as `=`, a plan made from statistics that said "no rows" (after
 * an autovacuum found every task finished) could read that index whole, every lease, instead of
 * probing the primary key (migrations/0022_one_index_per_lookup.sql).
 */
export function stillLeased(alias: string): string {
  return `${alias}.status is not distinct from 'leased'`;
}

export interface TaskRow {
  id: string;
  queue: string;
  status: TaskStatus;
  url: string | null;
  method: HttpMethod;
  headers: Record<string, string>;
  body: string | null;
  /** `null`: DEFAULT_CONTENT_TYPE (stored only when it is another). */
  content_type: string | null;
  concurrency_key: string | null;
  concurrency_limit: number | null;
  rate_limit: number | null;
  rate_period_ms: number | null;
  parent_id: string | null;
  resumes: number;
  priority: number;
  run_at: Date;
  expires_at: Date | null;
  attempts: number;
  max_attempts: number;
  backoff_initial_ms: number;
  backoff_max_ms: number;
  backoff_factor: number;
  backoff_jitter: number;
  deferrals: number;
  timeout_ms: number;
  lease_ms: number;
  dedup_key: string | null;
  /** migrations/0024_dedup_ttl.sql. */
  dedup_ttl_ms: string | null;
  lease_id: string | null;
  leased_at: Date | null;
  lease_expires_at: Date | null;
  cancel_requested_at: Date | null;
  result: string | null;
  last_error: string | null;
  last_status: number | null;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
  schedule: string | null;
  schedule_slot: Date | null;
  /** migrations/0019_callbacks.sql; absent where a read names its columns without it. */
  callback?: { url: string | null; failure_url: string | null } | null;
}

/**
 * Every column `toTask` reads, for a statement that names its columns rather than `*` (a
 * prepared statement must: src/db/db.ts, `prepared`). The check below fails to compile while a
 * `TaskRow` field is missing here.
 */
export const TASK_ROW_COLUMNS = [
  'id',
  'queue',
  'status',
  'url',
  'method',
  'headers',
  'body',
  'content_type',
  'concurrency_key',
  'concurrency_limit',
  'rate_limit',
  'rate_period_ms',
  'parent_id',
  'resumes',
  'priority',
  'run_at',
  'expires_at',
  'attempts',
  'max_attempts',
  'backoff_initial_ms',
  'backoff_max_ms',
  'backoff_factor',
  'backoff_jitter',
  'deferrals',
  'timeout_ms',
  'lease_ms',
  'dedup_key',
  'dedup_ttl_ms',
  'lease_id',
  'leased_at',
  'lease_expires_at',
  'cancel_requested_at',
  'result',
  'last_error',
  'last_status',
  'created_at',
  'updated_at',
  'finished_at',
  'schedule',
  'schedule_slot',
  'callback',
] as const satisfies readonly (keyof TaskRow)[];
const everyTaskRowColumn: Exclude<keyof TaskRow, (typeof TASK_ROW_COLUMNS)[number]> extends never ? true : never = true;
void everyTaskRowColumn;

export function toTask(row: TaskRow): Task {
  return {
    id: String(row.id),
    queue: row.queue,
    status: row.status,
    url: row.url,
    method: row.method,
    headers: row.headers,
    body: row.body,
    contentType: row.content_type ?? DEFAULT_CONTENT_TYPE,
    concurrencyKey: row.concurrency_key,
    concurrencyLimit: row.concurrency_limit,
    parentId: row.parent_id === null ? null : String(row.parent_id),
    resumes: row.resumes,
    rateLimit: row.rate_limit === null || row.rate_period_ms === null ? null : { limit: row.rate_limit, period_ms: row.rate_period_ms },
    priority: row.priority,
    runAt: row.run_at,
    expiresAt: row.expires_at,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    backoff: { initialMs: row.backoff_initial_ms, maxMs: row.backoff_max_ms, factor: row.backoff_factor, jitter: row.backoff_jitter },
    deferrals: row.deferrals,
    timeoutMs: row.timeout_ms,
    leaseMs: row.lease_ms,
    dedupKey: row.dedup_key,
    dedupTtlMs: row.dedup_ttl_ms === null || row.dedup_ttl_ms === undefined ? null : Number(row.dedup_ttl_ms),
    lease:
      row.lease_id && row.leased_at && row.lease_expires_at
        ? { id: row.lease_id, leasedAt: row.leased_at, expiresAt: row.lease_expires_at }
        : null,
    cancelRequestedAt: row.cancel_requested_at,
    result: row.result,
    lastError: row.last_error,
    lastStatus: row.last_status,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    finishedAt: row.finished_at,
    schedule: row.schedule !== null && row.schedule_slot !== null ? { name: row.schedule, slot: row.schedule_slot } : null,
    callbackUrl: row.callback?.url ?? null,
    failureCallbackUrl: row.callback?.failure_url ?? null,
  };
}

/** The retry policy as the insert statement reads it (and schedules keep it in their template). */
export function toBackoffJson(b: Backoff): { initial_ms: number; max_ms: number; factor: number; jitter: number } {
  return { initial_ms: b.initialMs, max_ms: b.maxMs, factor: b.factor, jitter: b.jitter };
}
