/** How a task looks on the wire (snake_case): values of the answers' types (answers.ts). */
import type { Task } from '../core/types.ts';
import type { AttemptRecord } from '../db/leases.ts';
import type { AttemptAnswer, TaskAnswer, TaskDetailAnswer, TaskStateAnswer } from './answers.ts';

/**
 * What a key without `tasks:read` may see of a task it did not just create (a dedup hit, a
 * cancel, a redrive): that it exists and its state, not its URL, body, result or errors.
 */
export function taskStateView(task: Pick<Task, 'id' | 'queue' | 'status'>): TaskStateAnswer {
  return { id: task.id, queue: task.queue, status: task.status };
}

export function taskView(task: Task): TaskAnswer {
  return {
    id: task.id,
    queue: task.queue,
    status: task.status,
    url: task.url,
    method: task.method,
    concurrency_key: task.concurrencyKey,
    concurrency_limit: task.concurrencyLimit,
    rate_limit: task.rateLimit,
    parent_id: task.parentId,
    resumes: task.resumes,
    priority: task.priority,
    run_at: task.runAt.toISOString(),
    expires_at: task.expiresAt?.toISOString() ?? null,
    attempts: task.attempts,
    max_attempts: task.maxAttempts,
    timeout_ms: task.timeoutMs,
    lease_ms: task.leaseMs,
    dedup_key: task.dedupKey,
    dedup_ttl_ms: task.dedupTtlMs,
    lease: task.lease
      ? { id: task.lease.id, leased_at: task.lease.leasedAt.toISOString(), expires_at: task.lease.expiresAt.toISOString() }
      : null,
    cancel_requested: task.cancelRequestedAt !== null,
    result: task.result,
    last_error: task.lastError,
    last_status: task.lastStatus,
    created_at: task.createdAt.toISOString(),
    updated_at: task.updatedAt.toISOString(),
    finished_at: task.finishedAt?.toISOString() ?? null,
    schedule: task.schedule ? { name: task.schedule.name, slot: task.schedule.slot.toISOString() } : null,
    callback_url: task.callbackUrl,
    failure_callback_url: task.failureCallbackUrl,
  };
}

/** One task with its body and every attempt. Header values may be credentials for the target: only their names are shown. */
export function taskDetailView(task: Task, attempts: readonly AttemptRecord[]): TaskDetailAnswer {
  return {
    ...taskView(task),
    content_type: task.contentType,
    header_names: Object.keys(task.headers),
    ...bodyView(task),
    attempt_history: attempts.map(attemptView),
  };
}

function attemptView(a: AttemptRecord): AttemptAnswer {
  return {
    attempt: a.attempt,
    lease_id: a.leaseId,
    started_at: a.startedAt.toISOString(),
    ended_at: a.endedAt.toISOString(),
    outcome: a.outcome,
    http_status: a.httpStatus,
    duration_ms: a.durationMs,
    error: a.error,
  };
}

/** A JSON body as JSON, anything else as text (a task's, or a schedule's template). */
export function bodyView(task: Pick<Task, 'body' | 'contentType'>): { body: unknown } | { body_text: string | null } {
  if (task.body !== null && task.contentType === 'application/json') {
    try {
      return { body: JSON.parse(task.body) };
    } catch {
      // Stored as text after all: show it as such.
    }
  }
  return { body_text: task.body };
}
