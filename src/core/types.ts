/**
 * The domain vocabulary of Sluice, shared by every layer.
 *
 * Glossary
 * - task: one unit of work: a request Sluice pushes to a URL until it succeeds, dies, is
 *   cancelled or expires.
 * - push: one signed HTTP request carrying a task to its endpoint; one push is one attempt.
 * - lease: the right to run a task until `expires_at`; granted by a claim, it holds one slot
 *   at every level the task falls under until it ends (2xx, complete, fail, release, expiry).
 * - slot: one unit of capacity at a level (cluster, queue, concurrency key).
 * - key: a task's `concurrency_key`, a partition of its queue with a limit of its own.
 * - claim pass: one atomic count-and-claim statement run by a dispatcher.
 * - settle: recording the outcome of a lease (succeeded, retry later, dead) with a
 *   compare-and-set on the lease id.
 * - due: a pending task whose `run_at` has come, or a lease past its expiry. Dispatch wakes
 *   at the next due time (core/wake.ts), never on a fixed tick.
 * - poke: telling the dispatcher that work comes due, now (a lease ended, a limit changed)
 *   or at a time (an enqueue); on Workers it goes to the scheduler Durable Object, on Node to
 *   the dispatch loop and, through NOTIFY, to the other instances.
 * - shard: one of the Worker's pusher Durable Objects; each runs reap → claim → push → settle
 *   with its own connection budget, and all claim through the one Postgres claim.
 */

/** Task ids are positive 64-bit integers (Postgres bigint); anything else cannot name a task. */
export function isTaskId(text: string): boolean {
  return /^[1-9]\d{0,18}$/.test(text) && BigInt(text) <= 9_223_372_036_854_775_807n;
}

export const TASK_STATUSES = ['pending', 'leased', 'waiting', 'succeeded', 'dead', 'cancelled', 'expired'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

/** States of a task not finished yet: the rows of the hot table (`sluice.tasks`). */
export const UNFINISHED_STATUSES = ['pending', 'leased', 'waiting'] as const satisfies readonly TaskStatus[];

/** States a task never leaves (except `dead`, through an explicit redrive). */
export const FINAL_STATUSES = ['succeeded', 'dead', 'cancelled', 'expired'] as const satisfies readonly TaskStatus[];

/** How an attempt ended, as its history records it. */
export const ATTEMPT_OUTCOMES = ['succeeded', 'retry', 'deferred', 'released', 'waiting', 'dead', 'cancelled'] as const;
export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number];

export const HTTP_METHODS = ['POST', 'PUT', 'PATCH', 'DELETE', 'GET'] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

export interface Backoff {
  initialMs: number;
  maxMs: number;
  factor: number;
  /** Fraction of the delay drawn at random on either side: 0.25 → ±25 %. */
  jitter: number;
}

export interface RetryPolicy {
  maxAttempts: number;
  backoff: Backoff;
}

export interface Lease {
  id: string;
  leasedAt: Date;
  expiresAt: Date;
}

/** A task as the database holds it. */
export interface Task {
  id: string;
  queue: string;
  status: TaskStatus;
  /** Where it is pushed; `null` for a task of a pull queue that named none. */
  url: string | null;
  method: HttpMethod;
  headers: Record<string, string>;
  /** The exact bytes pushed, as UTF-8 text; `null` means no body. */
  body: string | null;
  contentType: string;
  concurrencyKey: string | null;
  concurrencyLimit: number | null;
  /** At most `limit` pushes of its key per `period_ms`: sets the key's rate if none is set. */
  rateLimit: { limit: number; period_ms: number } | null;
  /** The task that enqueued it, when it said so: the task may wait for it (its child). */
  parentId: string | null;
  /** How many times it waited for children and was pushed again. */
  resumes: number;
  priority: number;
  runAt: Date;
  expiresAt: Date | null;
  attempts: number;
  maxAttempts: number;
  backoff: Backoff;
  deferrals: number;
  timeoutMs: number;
  leaseMs: number;
  dedupKey: string | null;
  /** How long it keeps its `dedupKey` after it finishes; `null`: only while unfinished. */
  dedupTtlMs: number | null;
  lease: Lease | null;
  cancelRequestedAt: Date | null;
  result: string | null;
  lastError: string | null;
  lastStatus: number | null;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
  /** The schedule and slot that enqueued it (docs/guide.md "Schedules"); `null` for a task enqueued by a call. */
  schedule: { name: string; slot: Date } | null;
  /** Whom Sluice tells when it succeeds, and when it goes dead (docs/guide.md "Callbacks"). */
  callbackUrl: string | null;
  failureCallbackUrl: string | null;
}

/** A task that a claim has just leased: it always carries its lease. */
export type LeasedTask = Task & { status: 'leased'; lease: Lease };

export const DEFAULT_RETRY: RetryPolicy = Object.freeze({
  maxAttempts: 5,
  backoff: Object.freeze({ initialMs: 1_000, maxMs: 3_600_000, factor: 2, jitter: 0.25 }),
});

export const DEFAULT_LEASE_MS = 60_000;
export const DEFAULT_TIMEOUT_MS = 30_000;

/** Limits on what a client may send and what Sluice stores. */
export const LIMITS = Object.freeze({
  /** One enqueue request body. */
  requestBytes: 1024 * 1024,
  /** Tasks one pull may lease, and the longest it may wait for them. */
  pullMax: 100,
  pullWaitMs: 20_000,
  /** A batch enqueue request body. */
  batchRequestBytes: 10 * 1024 * 1024,
  /** A task's payload. */
  taskBodyBytes: 512 * 1024,
  /** How deeply a JSON body may nest. */
  bodyDepth: 64,
  batchSize: 1_000,
  /** What is kept of a push response (the result) and of an error text. */
  resultBytes: 64 * 1024,
  errorChars: 2_000,
  headerCount: 32,
  headerValueChars: 4_096,
  nameChars: 128,
  keyChars: 256,
  urlChars: 2_048,
  /** Retry-After deferrals before a 429/503 counts as a failed attempt after all. */
  maxDeferrals: 20,
  /** The longest Retry-After honoured; longer answers are clamped to this. */
  maxDeferralMs: 24 * 3_600_000,
  maxAttempts: 1_000,
  maxLeaseMs: 12 * 3_600_000,
  maxDelayMs: 365 * 24 * 3_600_000,
  /** URLs an endpoint group holds at most (0025_groups.sql's CHECK says it too). */
  groupUrls: 100,
  /** The longest a task keeps its dedup key after it finishes (`dedup_ttl_ms`; 0024_dedup_ttl.sql's CHECK says it too). */
  maxDedupTtlMs: 30 * 24 * 3_600_000,
  /** The longest period of a rate limit. */
  maxRatePeriodMs: 24 * 3_600_000,
});
