/**
 * An enqueue request checked whole and resolved (docs/DESIGN.md §2): its fields by the schema
 * (enqueue.ts), then what only the configuration can reveal, into a `NewTask` with every default
 * resolved: its queue's, its key from the body, its targets checked, its callbacks, its trace.
 */
import { type Config, queueDefaults } from '../../config.ts';
import type { FieldIssue } from '../../core/errors.ts';
import { fieldIssues } from '../../core/issues.ts';
import { keepMs } from '../../core/retention.ts';
import { textProblem } from '../../core/text.ts';
import { TRACEPARENT, TRACESTATE } from '../../core/trace.ts';
import { LIMITS } from '../../core/types.ts';
import type { Callback, NewTask } from '../../db/new-task.ts';
import { checkTarget } from '../../security/targets.ts';
import { type EnqueueInput, enqueueSchema } from './enqueue.ts';

/**
 * One enqueue request checked whole, in one round: its fields, then what only the configuration
 * can reveal. Issue paths start with `at` (`tasks.3` in a batch, `task` in a schedule).
 */
export function checkTask(item: unknown, config: Config, at: string): { task: NewTask; group?: string } | { issues: FieldIssue[] } {
  const within = (path: string) => (at ? `${at}.${path}` : path);
  const parsed = enqueueSchema.safeParse(item);
  if (!parsed.success) {
    const issues = fieldIssues(parsed.error, at);
    // The URL's own problems are reported in the same round as the others, not after them.
    const url = (item as { url?: unknown } | null)?.url;
    if (typeof url === 'string' && !issues.some((i) => i.path === within('url'))) {
      const target = checkTarget(url, config.allowPrivateTargets);
      if (!target.ok) issues.push({ path: within('url'), message: target.reason });
    }
    return { issues };
  }
  const resolved = resolveTask(parsed.data, config);
  if ('issues' in resolved) return { issues: resolved.issues.map((x) => ({ ...x, path: within(x.path) })) };
  // A group's task has no url yet: it becomes one task per URL of the group (api/groups.ts).
  return parsed.data.group === undefined ? resolved : { ...resolved, group: parsed.data.group };
}

/**
 * Resolves an enqueue request against its queue's defaults. Returns the task, or the
 * problems (paths relative to the task) that only the configuration can reveal.
 */
export function resolveTask(input: EnqueueInput, config: Config): { task: NewTask } | { issues: FieldIssue[] } {
  const defaults = queueDefaults(config, input.queue);
  const issues: FieldIssue[] = [];
  // No url: the task is for a pull queue, which the route checks the queue is (api/pull.ts).
  const url = input.group !== undefined ? null : checkedUrl('url', input.url ?? defaults.url, config, issues);
  const callback = resolveCallback(input, config, issues);
  const leaseMs = input.lease_ms ?? defaults.leaseMs;
  // A finished task's dedup record is its history row: kept no longer than the window.
  const kept = keepMs(config);
  if (input.dedup_ttl_ms !== undefined && kept !== null && input.dedup_ttl_ms > kept) {
    issues.push({
      path: 'dedup_ttl_ms',
      message: `is at most how long history keeps a finished task on this deployment (${kept} ms: SLUICE_RETENTION, at least SLUICE_MAX_LEASE_MS)`,
    });
  }
  if (input.lease_ms !== undefined && input.lease_ms > config.maxLeaseMs) {
    issues.push({ path: 'lease_ms', message: `is at most ${config.maxLeaseMs} on this deployment (SLUICE_MAX_LEASE_MS)` });
  }
  const timeoutMs = input.timeout_ms ?? defaults.timeoutMs;
  if (timeoutMs >= leaseMs) {
    issues.push({
      path: input.timeout_ms !== undefined ? 'timeout_ms' : 'lease_ms',
      message: `the push timeout (${timeoutMs} ms) must be shorter than the lease (${leaseMs} ms)`,
    });
  }
  let body: string | null = null;
  let contentType = 'application/json';
  if (input.body_text !== undefined) {
    body = input.body_text;
    contentType = input.content_type ?? 'text/plain; charset=utf-8';
  } else if (input.body !== undefined) {
    if (jsonDepth(input.body) > LIMITS.bodyDepth)
      issues.push({ path: 'body', message: `is nested more than ${LIMITS.bodyDepth} levels deep` });
    else body = JSON.stringify(input.body);
  }
  if (body !== null && new TextEncoder().encode(body).length > LIMITS.taskBodyBytes) {
    issues.push({ path: input.body_text !== undefined ? 'body_text' : 'body', message: `is larger than ${LIMITS.taskBodyBytes} bytes` });
  }
  const concurrencyKey = input.concurrency_key !== undefined ? input.concurrency_key : keyFromBody(input.body, defaults.keyFrom);
  if (concurrencyKey !== null && input.concurrency_key === undefined) {
    const problem = concurrencyKey.length > LIMITS.keyChars ? `is longer than ${LIMITS.keyChars} characters` : textProblem(concurrencyKey);
    if (problem) issues.push({ path: `body.${defaults.keyFrom}`, message: `gives the concurrency key (key_from), which ${problem}` });
  }
  for (const field of ['concurrency_limit', 'rate_limit'] as const) {
    if (input[field] !== undefined && concurrencyKey === null) {
      issues.push({ path: field, message: "limits a concurrency key: give `concurrency_key` too (or configure the queue's key_from)" });
    }
  }
  const b = input.backoff ?? {};
  const backoff = {
    initialMs: b.initial_ms ?? defaults.backoff.initialMs,
    maxMs: b.max_ms ?? defaults.backoff.maxMs,
    factor: b.factor ?? defaults.backoff.factor,
    jitter: b.jitter ?? defaults.backoff.jitter,
  };
  if (backoff.initialMs > backoff.maxMs)
    issues.push({ path: 'backoff.initial_ms', message: `must not exceed backoff.max_ms (${backoff.maxMs})` });
  if (issues.length > 0) return { issues };
  return {
    task: {
      queue: input.queue,
      url,
      method: input.method,
      headers: withTrace(input),
      body,
      contentType,
      concurrencyKey,
      concurrencyLimit: input.concurrency_limit ?? null,
      rateLimit: input.rate_limit ?? null,
      parentId: input.parent_id ?? null,
      priority: input.priority,
      runAt: input.run_at !== undefined ? new Date(input.run_at) : null,
      delayMs: input.delay_ms ?? null,
      expiresAt: input.expires_at !== undefined ? new Date(input.expires_at) : null,
      ttlMs: input.ttl_ms ?? null,
      maxAttempts: input.max_attempts ?? defaults.maxAttempts,
      backoff,
      timeoutMs,
      leaseMs,
      dedupKey: input.dedup_key ?? null,
      dedupTtlMs: input.dedup_ttl_ms ?? null,
      callback,
      keyStrategy: config.queues[input.queue]?.key_strategy ?? 'queue',
      ...(input.debounce
        ? {
            debounce: {
              key: input.debounce.key,
              periodMs: input.debounce.period_ms,
              maxWaitMs: input.debounce.max_wait_ms ?? null,
              mode: input.debounce.mode,
            },
          }
        : {}),
    },
  };
}

/** How deeply a parsed JSON value nests (iteratively: a deep value must not overflow the stack). */
function jsonDepth(value: unknown): number {
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (item === null || typeof item !== 'object') continue;
    deepest = Math.max(deepest, depth);
    if (deepest > LIMITS.bodyDepth) return deepest;
    for (const child of Object.values(item)) stack.push([child, depth + 1]);
  }
  return deepest;
}

/**
 * The queue every callback is a task of: its limits and retry settings are the callbacks'. Stored
 * with each callback, so the trigger that enqueues them (migrations/functions/callbacks.sql) reads it.
 */
const CALLBACK_QUEUE = 'callbacks';

/** A URL Sluice will push to, as the target check writes it; a refused one is an issue at `path`. */
function checkedUrl(path: string, url: string | null, config: Config, issues: FieldIssue[]): string | null {
  if (url === null) return null;
  const target = checkTarget(url, config.allowPrivateTargets);
  if (target.ok) return target.url.href;
  issues.push({ path, message: target.reason });
  return url;
}

/**
 * A task's callbacks, checked as its own URL is, with the retry settings the notification will
 * have (the queue `callbacks`'s, as configured when the task is enqueued).
 */
function resolveCallback(input: EnqueueInput, config: Config, issues: FieldIssue[]): Callback | null {
  const url = checkedUrl('callback_url', input.callback_url ?? null, config, issues);
  const failureUrl = checkedUrl('failure_callback_url', input.failure_callback_url ?? null, config, issues);
  if (url === null && failureUrl === null) return null;
  const d = queueDefaults(config, CALLBACK_QUEUE);
  return {
    queue: CALLBACK_QUEUE,
    url,
    failure_url: failureUrl,
    max_attempts: d.maxAttempts,
    backoff_initial_ms: d.backoff.initialMs,
    backoff_max_ms: d.backoff.maxMs,
    backoff_factor: d.backoff.factor,
    backoff_jitter: d.backoff.jitter,
    timeout_ms: d.timeoutMs,
    lease_ms: d.leaseMs,
  };
}

/**
 * The task's headers, its trace context among them by lower-case name (from the fields, or as
 * given in `headers`): the push finds it there, and makes each attempt a child of it.
 */
function withTrace(input: EnqueueInput): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(input.headers ?? {})) {
    const lower = name.toLowerCase();
    headers[lower === TRACEPARENT || lower === TRACESTATE ? lower : name] = value;
  }
  if (input.traceparent !== undefined) headers[TRACEPARENT] = input.traceparent;
  if (input.tracestate !== undefined) headers[TRACESTATE] = input.tracestate;
  return headers;
}

/**
 * The concurrency key a queue's `key_from` derives from a task's body (River's `ByArgs`): the
 * field's text, or the empty key when the field is missing. `null` when the queue has no
 * `key_from`.
 */
export function keyFromBody(body: unknown, keyFrom: string | null): string | null {
  if (keyFrom === null) return null;
  let value: unknown = body;
  for (const part of keyFrom.split('.')) {
    const own = value !== null && typeof value === 'object' && !Array.isArray(value) && Object.hasOwn(value, part);
    value = own ? (value as Record<string, unknown>)[part] : undefined;
  }
  if (value === undefined || value === null) return '';
  return typeof value === 'string' ? value : JSON.stringify(value);
}
