/** The tasks table's row, and its mapping to the domain `Task`. */
import type { Backoff, HttpMethod, Task, TaskStatus } from '../core/types.ts';

export interface TaskRow {
  id: string;
  queue: string;
  status: TaskStatus;
  url: string;
  method: HttpMethod;
  headers: Record<string, string>;
  body: string | null;
  content_type: string;
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
  backoff: { initial_ms: number; max_ms: number; factor: number; jitter: number };
  deferrals: number;
  timeout_ms: number;
  lease_ms: number;
  dedup_key: string | null;
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
}

export function toTask(row: TaskRow): Task {
  return {
    id: String(row.id),
    queue: row.queue,
    status: row.status,
    url: row.url,
    method: row.method,
    headers: row.headers,
    body: row.body,
    contentType: row.content_type,
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
    backoff: fromBackoffJson(row.backoff),
    deferrals: row.deferrals,
    timeoutMs: row.timeout_ms,
    leaseMs: row.lease_ms,
    dedupKey: row.dedup_key,
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
  };
}

export function toBackoffJson(b: Backoff): TaskRow['backoff'] {
  return { initial_ms: b.initialMs, max_ms: b.maxMs, factor: b.factor, jitter: b.jitter };
}

function fromBackoffJson(b: TaskRow['backoff']): Backoff {
  return { initialMs: b.initial_ms, maxMs: b.max_ms, factor: b.factor, jitter: b.jitter };
}
