/**
 * A task to insert (`NewTask`, every default resolved), what its enqueue answers (`Enqueued`),
 * and how the enqueue's statement takes it: one typed array per column (`inputColumns`), from
 * its snake_case row (`toInputRow`), the form schedules keep their template in too.
 */
import { ValidationError } from '../core/errors.ts';
import type { KeyStrategy } from '../core/queue-settings.ts';
import type { Backoff, HttpMethod, Task } from '../core/types.ts';
import type { Debounce } from './debounce.ts';
import { toBackoffJson } from './rows.ts';

/** A task to insert, every default already resolved. Times are the database's. */
export interface NewTask {
  queue: string;
  /** `null`: a pull queue's task (src/api/pull.ts checks the queue is one). */
  url: string | null;
  method: HttpMethod;
  headers: Record<string, string>;
  body: string | null;
  contentType: string;
  concurrencyKey: string | null;
  concurrencyLimit: number | null;
  rateLimit: { limit: number; period_ms: number } | null;
  parentId: string | null;
  priority: number;
  /** Not before: an absolute time, or a delay from the database's `now()`. */
  runAt: Date | null;
  delayMs: number | null;
  /** Not started after: an absolute time, or a time-to-live from `now()`. */
  expiresAt: Date | null;
  ttlMs: number | null;
  maxAttempts: number;
  backoff: Backoff;
  timeoutMs: number;
  leaseMs: number;
  dedupKey: string | null;
  /** How long the task holds its `dedupKey` after it finishes (src/db/dedup-ttl.ts); absent or `null`: not at all. */
  dedupTtlMs?: number | null;
  /** Enqueues with the same queue and key join one task (src/db/debounce.ts). */
  debounce?: Debounce | null;
  /** Whom to tell when it succeeds or goes dead (migrations/0019_callbacks.sql). */
  callback?: Callback | null;
  /** Its queue's `key_strategy` in SLUICE_QUEUES (default `queue`); a run-time override wins, read at the insert (db/key-strategy.ts). */
  keyStrategy?: KeyStrategy;
}

export interface Enqueued<T = Task> {
  task: T;
  /** True when an unfinished task with the same `dedup_key` was returned instead. */
  deduplicated: boolean;
  /** For a task with `debounce`: true when it joined an earlier task, which is `task`. */
  debounced?: boolean;
  /** Under `key_strategy: cancel_newest`: true when the key had an unfinished task, which is `task`; nothing was made. */
  skipped?: boolean;
  /** Leases its key strategy ended (`cancel_in_progress`): their slots are free, their pushes' answers find no lease. */
  endedLeases?: readonly KeyCancelled[];
}

/** A task a key strategy cancelled; `leaseId` when it was leased (its lease ended with it). */
export interface KeyCancelled {
  id: string;
  queue: string;
  key: string | null;
  leaseId: string | null;
}

/** A task's callbacks, with the retry settings of the notification (the queue `callbacks`'s). */
export interface Callback {
  /** The queue the notification is a task of (`callbacks`). */
  queue: string;
  url: string | null;
  failure_url: string | null;
  max_attempts: number;
  backoff_initial_ms: number;
  backoff_max_ms: number;
  backoff_factor: number;
  backoff_jitter: number;
  timeout_ms: number;
  lease_ms: number;
}

/**
 * The enqueue's input: one typed array per column, a task per index (`inputColumns`). Postgres
 * reads typed arrays for about two thirds of what the same tasks as a JSON document cost it.
 */
export const INPUT_COLUMNS = [
  ['queue', 'text'],
  ['url', 'text'],
  ['method', 'text'],
  ['headers', 'jsonb'],
  ['body', 'text'],
  ['content_type', 'text'],
  ['concurrency_key', 'text'],
  ['concurrency_limit', 'integer'],
  ['rate_limit', 'integer'],
  ['rate_period_ms', 'integer'],
  ['parent_id', 'bigint'],
  ['priority', 'integer'],
  ['run_at', 'timestamptz'],
  ['delay_ms', 'bigint'],
  ['expires_at', 'timestamptz'],
  ['ttl_ms', 'bigint'],
  ['max_attempts', 'integer'],
  ['backoff_initial_ms', 'integer'],
  ['backoff_max_ms', 'integer'],
  ['backoff_factor', 'float8'],
  ['backoff_jitter', 'float8'],
  ['timeout_ms', 'integer'],
  ['lease_ms', 'integer'],
  ['dedup_key', 'text'],
  ['dedup_ttl_ms', 'bigint'],
  ['callback', 'jsonb'],
] as const;

type InputColumn = (typeof INPUT_COLUMNS)[number][0];

/** The tasks as the insert's parameters, in `INPUT_COLUMNS` order. */
export function inputColumns(tasks: readonly NewTask[]): unknown[][] {
  const rows = tasks.map((t) => {
    const { backoff, headers, callback, ...row } = toInputRow(t, 0);
    const values: Record<InputColumn, unknown> = {
      ...row,
      headers: JSON.stringify(headers),
      callback: callback === null ? null : JSON.stringify(callback),
      backoff_initial_ms: backoff.initial_ms,
      backoff_max_ms: backoff.max_ms,
      backoff_factor: backoff.factor,
      backoff_jitter: backoff.jitter,
    };
    return values;
  });
  return INPUT_COLUMNS.map(([name]) => rows.map((r) => r[name]));
}

/** A task in snake_case, the form the insert's columns are built from; schedules keep their template in this form. */
export type TaskInputRow = ReturnType<typeof toInputRow>;

export function toInputRow(t: NewTask, ord: number) {
  return {
    ord,
    queue: t.queue,
    url: t.url,
    method: t.method,
    headers: t.headers,
    body: t.body,
    content_type: t.contentType,
    concurrency_key: t.concurrencyKey,
    concurrency_limit: t.concurrencyLimit,
    rate_limit: t.rateLimit?.limit ?? null,
    rate_period_ms: t.rateLimit?.period_ms ?? null,
    parent_id: t.parentId,
    priority: t.priority,
    run_at: t.runAt?.toISOString() ?? null,
    delay_ms: t.delayMs,
    expires_at: t.expiresAt?.toISOString() ?? null,
    ttl_ms: t.ttlMs,
    max_attempts: t.maxAttempts,
    backoff: toBackoffJson(t.backoff),
    timeout_ms: t.timeoutMs,
    lease_ms: t.leaseMs,
    dedup_key: t.dedupKey,
    dedup_ttl_ms: t.dedupTtlMs ?? null,
    callback: t.callback ?? null,
  };
}

/**
 * The refusal of `parent_id`s that name no unfinished task: the enqueue's, and the same words for
 * a parent a key limited to queues may not see (src/api/queue-access.ts), so that the two answers
 * cannot be told apart.
 */
export function parentsMissing(missing: readonly string[]): ValidationError {
  return new ValidationError([{ path: 'parent_id', message: `names no unfinished task (${missing.join(', ')})` }]);
}
