/**
 * The API's wire format (snake_case), as TypeScript types for SDK users, written out so that
 * the SDK needs no zod. The API validates requests with zod schemas (src/api/schemas/) and
 * builds its answers from others (src/api/answers.ts); test/unit/wire.test.ts holds each type
 * here equal to its schema there. Queues, their limits and levels, schedules, groups and
 * endpoints are in wire-queues.ts.
 */

export type HttpMethod = 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'GET';
export type TaskStatus = 'pending' | 'leased' | 'waiting' | 'succeeded' | 'dead' | 'cancelled' | 'expired';
/** Where a setting's value comes from: a run-time override, the environment, the task, or the default. */
export type Source = 'override' | 'env' | 'task' | 'default';
/**
 * At most `limit` pushes in any window of `period_ms`; with `burst` (a queue's rates only), up to
 * `burst` at once, refilling at `limit` per `period_ms`.
 */
export interface Rate {
  limit: number;
  period_ms: number;
  burst?: number | undefined;
}

export interface EnqueueRequest {
  /** Endpoint to push to. Default: the queue's `url`; none for a task of a pull queue. */
  url?: string;
  /**
   * Instead of `url`: an endpoint group (PUT /v1/groups/:name). The task becomes one task per URL
   * of the group, in one transaction, answered `{ tasks: [...] }`. Not with `dedup_key` or `debounce`.
   */
  group?: string;
  /** Default `default`. */
  queue?: string;
  /** Any JSON value, sent as application/json. */
  body?: unknown;
  /** Raw text instead of `body`, sent with `content_type`. */
  body_text?: string;
  content_type?: string;
  /** Extra headers forwarded on every push. */
  headers?: Record<string, string>;
  /** Default `POST`. */
  method?: HttpMethod;
  /** Limits apply per key within the queue. Default: derived by the queue's key_from, else none. */
  concurrency_key?: string | null;
  /** The key's limit when none is configured yet. */
  concurrency_limit?: number;
  /** The key's rate when none is configured yet: at most `limit` pushes in any window of `period_ms`. */
  rate_limit?: { limit: number; period_ms: number };
  /** The task enqueueing this one (from its push's Sluice-Task-Id): it may then wait for it. */
  parent_id?: string;
  /** Lower runs first. Default 0. */
  priority?: number;
  /** Not before: a delay, or a time (RFC 3339). */
  delay_ms?: number;
  run_at?: string;
  /** Not started after: a time-to-live, or a time. */
  ttl_ms?: number;
  expires_at?: string;
  /** Default: the queue's, else 5. */
  max_attempts?: number;
  backoff?: { initial_ms?: number; max_ms?: number; factor?: number; jitter?: number };
  /** One push's deadline; shorter than the lease. Default 30 s. */
  timeout_ms?: number;
  /** Default 60 s. */
  lease_ms?: number;
  /** While a task with this key is unfinished in the queue, enqueueing again returns it. */
  dedup_key?: string;
  /**
   * With `dedup_key`: how long the task keeps its key after it finishes (any final status),
   * from its finish on the database's clock. At most 30 days, and at most the retention window.
   */
  dedup_ttl_ms?: number;
  /**
   * Enqueues with the same queue and key join one task. trailing (default): it runs `period_ms`
   * after the last of them, with the last body, never later than `max_wait_ms` after the first;
   * leading: the first runs at once, and those within `period_ms` of it join it without a push.
   */
  debounce?: { key: string; period_ms: number; max_wait_ms?: number; mode?: 'trailing' | 'leading' };
  /**
   * The W3C trace context the task runs in (else the enqueue request's own `traceparent`
   * header): every push sends it with the same trace id and flags, a span id per attempt.
   */
  traceparent?: string;
  /** Vendor trace data (W3C tracestate), sent as it is with every push; only with `traceparent`. */
  tracestate?: string;
  /** Told, by a signed push (a task of the queue `callbacks`), when the task succeeds, with what it answered. */
  callback_url?: string;
  /** Told when the task goes dead, with its last error. */
  failure_callback_url?: string;
}

export interface TaskView {
  id: string;
  queue: string;
  status: TaskStatus;
  /** Where it is pushed; `null` for a task of a pull queue that names none. */
  url: string | null;
  method: HttpMethod;
  concurrency_key: string | null;
  concurrency_limit: number | null;
  rate_limit: Rate | null;
  parent_id: string | null;
  resumes: number;
  priority: number;
  run_at: string;
  expires_at: string | null;
  attempts: number;
  max_attempts: number;
  timeout_ms: number;
  lease_ms: number;
  dedup_key: string | null;
  /** How long it keeps its dedup_key after it finishes; null: only while unfinished. */
  dedup_ttl_ms: number | null;
  lease: { id: string; leased_at: string; expires_at: string } | null;
  cancel_requested: boolean;
  result: string | null;
  last_error: string | null;
  last_status: number | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
  /** The schedule and slot that enqueued the task; null for a task enqueued by a call. */
  schedule: { name: string; slot: string } | null;
  /** Told when the task succeeds (a task of the queue `callbacks`). */
  callback_url: string | null;
  /** Told when the task goes dead. */
  failure_callback_url: string | null;
}

export interface EnqueuedTask extends TaskView {
  deduplicated: boolean;
  /** For a task with `debounce`: whether it joined an earlier task (the one answered). */
  debounced?: boolean | undefined;
  /** Under the queue's `key_strategy: cancel_newest`: true when its key had an unfinished task, which is answered; nothing was made. */
  skipped?: boolean | undefined;
}

/**
 * What a bulk enqueue with `{ minimal: true }` reads back of each task (`Prefer: return=minimal`),
 * and what a key without tasks:read sees of a deduplicated hit.
 */
export interface EnqueuedRef {
  id: string;
  queue: string;
  status: TaskStatus;
  deduplicated: boolean;
  debounced?: boolean | undefined;
  skipped?: boolean | undefined;
}

export interface AttemptView {
  attempt: number;
  lease_id: string;
  started_at: string;
  ended_at: string;
  outcome: 'succeeded' | 'retry' | 'deferred' | 'released' | 'waiting' | 'dead' | 'cancelled';
  http_status: number | null;
  duration_ms: number | null;
  error: string | null;
}

export interface TaskDetail extends TaskView {
  content_type: string;
  /** Header values may be credentials for the target: only their names are shown. */
  header_names: string[];
  /** The JSON body, when it is JSON; else `body_text`. */
  body?: unknown;
  body_text?: string | null;
  attempt_history: AttemptView[];
}

export interface TaskList {
  tasks: TaskView[];
  next_cursor: string | null;
}

/** POST /v1/queues/:queue/lease: what a pull consumer asks for. */
export interface PullRequest {
  /** The most tasks to lease, 1–100. Default 1. */
  max?: number;
  /** How long to wait for a task when none is ready, up to 20,000 ms. Default 0. */
  wait_ms?: number;
  /** Where the consumer forwards each task: each then carries the push Sluice would send there. */
  push_to?: string;
}

/** A task leased by a pull: held as after a push answered `Sluice-Ack: lease`. */
export interface PulledTask {
  id: string;
  queue: string;
  concurrency_key: string | null;
  attempt: number;
  max_attempts: number;
  resumes: number;
  /** The JSON body, when it is JSON. */
  body?: unknown;
  /** The body as text, when it is not JSON. */
  body_text?: string | null;
  content_type: string | null;
  headers: Record<string, string>;
  /** `token` authorizes the lease calls, as a push's Sluice-Lease-Token. */
  lease: { id: string; token: string; expires_at: string };
  /** With `push_to`: the signed push Sluice would send there. */
  push?: { url: string; method: HttpMethod; headers: Record<string, string>; body_text: string | null };
}

/** POST /v1/tasks/redrive: which dead tasks to redrive (each filter optional), or only count. */
export interface RedriveRequest {
  queue?: string;
  /** Only tasks whose URL starts with this, such as an origin. */
  url_prefix?: string;
  /** Only tasks that went dead at or after this time (ISO 8601), and before `until`. */
  since?: string;
  until?: string;
  /** Count the matching dead tasks (up to 10,000), redrive none. Default false. */
  dry_run?: boolean;
  /** Go on after this task id: the `last_id` of a call that answered `more`. */
  after?: string;
}

/** What POST /v1/tasks/redrive did. */
export interface RedriveResult {
  /** Dead tasks examined that match (a dry run: how many match, up to 10,000). */
  matched: number;
  redriven: number;
  /** Left dead: another unfinished task of their queue holds their dedup key. */
  skipped: number;
  /** More may match: call again with `after` set to `last_id`. */
  more: boolean;
  last_id: string | null;
  dry_run: boolean;
}
