/**
 * The enqueue request's wire schema (snake_case, any-language friendly), and the step that turns
 * a valid one into a `NewTask` with every default resolved (docs/DESIGN.md §2).
 */
import { z } from 'zod';
import { type Config, queueDefaults } from '../../config.ts';
import { backoffSchema, NAME_PATTERN } from '../../config-fields.ts';
import type { FieldIssue } from '../../core/errors.ts';
import { fieldIssues } from '../../core/issues.ts';
import { rateSchema } from '../../core/queue-settings.ts';
import { keepMs } from '../../core/retention.ts';
import { textProblem } from '../../core/text.ts';
import { parseTraceparent, TRACEPARENT, TRACESTATE, tracestateProblem } from '../../core/trace.ts';
import { HTTP_METHODS, isTaskId, LIMITS } from '../../core/types.ts';
import type { Callback, NewTask } from '../../db/enqueue.ts';
import { isReservedHeader } from '../../protocol/headers.ts';
import { checkTarget } from '../../security/targets.ts';
import { HEADER_NAME, headerText, text } from './text.ts';

/** Accepted times: from 2000 to a year ahead (Postgres's range, and no silly dates). */
const EARLIEST = Date.parse('2000-01-01T00:00:00Z');

const headersSchema = z
  .record(z.string().regex(HEADER_NAME, 'is not a valid header name'), headerText().max(LIMITS.headerValueChars))
  .superRefine((headers, ctx) => {
    const names = Object.keys(headers);
    if (names.length > LIMITS.headerCount) ctx.addIssue({ code: 'custom', message: `at most ${LIMITS.headerCount} headers` });
    for (const name of names) {
      if (isReservedHeader(name)) {
        const hint = name.toLowerCase() === 'content-type' ? ' (use `content_type` with `body_text`)' : '';
        ctx.addIssue({ code: 'custom', path: [name], message: `is set by Sluice and cannot be given${hint}` });
      }
      const problem = traceProblem(name.toLowerCase(), headers[name] as string);
      if (problem) ctx.addIssue({ code: 'custom', path: [name], message: problem });
    }
  });

const TRACEPARENT_FORM = 'must be a W3C traceparent: 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, ids not all zeros';

/** What is wrong with a trace header's value (W3C Trace Context), if it is one. */
function traceProblem(name: string, value: string): string | null {
  if (name === TRACEPARENT) return parseTraceparent(value) ? null : TRACEPARENT_FORM;
  if (name === TRACESTATE) return tracestateProblem(value);
  return null;
}

const timestamp = z.iso.datetime({ offset: true, error: 'must be an RFC 3339 timestamp, e.g. 2026-01-31T12:00:00Z' }).refine((value) => {
  const at = Date.parse(value);
  return at >= EARLIEST && at <= Date.now() + LIMITS.maxDelayMs;
}, 'must lie between 2000-01-01 and one year from now');

export const enqueueSchema = z
  .object({
    url: text().max(LIMITS.urlChars).optional(),
    group: z
      .string()
      .max(LIMITS.nameChars)
      .regex(NAME_PATTERN, 'must start with a letter or digit and use only letters, digits and _ . : -')
      .optional()
      .describe(
        'Instead of `url`: an endpoint group (PUT /v1/groups/:name). The task becomes one task per URL of the group, ' +
          'written in one transaction, each with the same body and settings and its own retries, lease and limits; ' +
          'answered 201 {"tasks": [...]} (in a batch, in its place). Not with `dedup_key` or `debounce`.',
      ),
    queue: z
      .string()
      .max(LIMITS.nameChars)
      .regex(NAME_PATTERN, 'must start with a letter or digit and use only letters, digits and _ . : -')
      .default('default'),
    body: z.unknown().optional(),
    body_text: text().optional(),
    content_type: headerText().min(1).max(255).optional(),
    headers: headersSchema.optional(),
    method: z.enum(HTTP_METHODS).default('POST'),
    concurrency_key: text().max(LIMITS.keyChars).nullable().optional(),
    concurrency_limit: z.number().int().min(1).max(1_000_000).optional(),
    rate_limit: rateSchema.optional(),
    parent_id: z.string().refine(isTaskId, 'must be a task id').optional(),
    priority: z.number().int().min(-1_000_000).max(1_000_000).default(0),
    delay_ms: z.number().int().min(0).max(LIMITS.maxDelayMs).optional(),
    run_at: timestamp.optional(),
    ttl_ms: z.number().int().min(1).max(LIMITS.maxDelayMs).optional(),
    expires_at: timestamp.optional(),
    max_attempts: z.number().int().min(1).max(LIMITS.maxAttempts).optional(),
    backoff: backoffSchema.optional(),
    timeout_ms: z.number().int().min(100).max(LIMITS.maxLeaseMs).optional(),
    lease_ms: z.number().int().min(1_000).max(LIMITS.maxLeaseMs).optional(),
    dedup_key: text().min(1).max(LIMITS.keyChars).optional(),
    dedup_ttl_ms: z
      .number()
      .int()
      .min(1)
      .max(LIMITS.maxDedupTtlMs)
      .optional()
      .describe(
        'With `dedup_key`: how long the task keeps its key after it finishes (succeeded, dead, cancelled or expired), from ' +
          "its finish on the database's clock; an enqueue with that key meanwhile answers 200 with it, `deduplicated: true`. " +
          'At most 30 days (2592000000), and at most the retention window (SLUICE_RETENTION).',
      ),
    traceparent: headerText()
      .refine((v) => traceProblem(TRACEPARENT, v) === null, TRACEPARENT_FORM)
      .optional()
      .describe(
        "The W3C trace context the task runs in (else the enqueue request's own `traceparent` header): every push " +
          'sends it with the same trace id and flags and a span id of its own per attempt.',
      ),
    tracestate: headerText()
      .check((ctx) => {
        const problem = traceProblem(TRACESTATE, ctx.value);
        if (problem) ctx.issues.push({ code: 'custom', message: problem, input: ctx.value });
      })
      .optional()
      .describe('Vendor trace data (W3C tracestate), sent as it is with every push; only with `traceparent`.'),
    callback_url: text()
      .max(LIMITS.urlChars)
      .optional()
      .describe(
        'Told when the task succeeds: a signed POST of {task_id, queue, status, attempts, http_status, result, error, ' +
          "finished_at}, itself a task of the queue `callbacks` (retried by that queue's settings), once per finish.",
      ),
    failure_callback_url: text().max(LIMITS.urlChars).optional().describe('Told the same way when the task goes dead.'),
    debounce: z
      .object({
        key: text().min(1).max(LIMITS.keyChars),
        period_ms: z.number().int().min(1).max(LIMITS.maxDelayMs),
        max_wait_ms: z.number().int().min(1).max(LIMITS.maxDelayMs).optional(),
        mode: z.enum(['trailing', 'leading']).default('trailing'),
      })
      .strict()
      .optional()
      .describe(
        'Enqueues with the same queue and key join one task. trailing (default): it runs period_ms after the last of them, ' +
          'with the last body, never later than max_wait_ms after the first; leading: the first runs at once, and those ' +
          'within period_ms of it join it without a push. The answer names the task joined (`debounced`).',
      ),
  })
  .strict()
  .superRefine((t, ctx) => {
    if (t.debounce !== undefined) {
      if (t.dedup_key !== undefined)
        ctx.addIssue({ code: 'custom', path: ['debounce'], message: 'give either `dedup_key` or `debounce`, not both' });
      if (t.debounce.mode === 'trailing' && (t.delay_ms !== undefined || t.run_at !== undefined)) {
        ctx.addIssue({
          code: 'custom',
          path: ['debounce'],
          message: 'a trailing debounce sets when the task runs: give no `delay_ms` or `run_at`',
        });
      }
      const { period_ms, max_wait_ms } = t.debounce;
      if (max_wait_ms !== undefined && max_wait_ms < period_ms) {
        ctx.addIssue({ code: 'custom', path: ['debounce', 'max_wait_ms'], message: `must be at least period_ms (${period_ms})` });
      }
    }
    const both = (a: keyof typeof t, b: keyof typeof t) => {
      if (t[a] !== undefined && t[b] !== undefined)
        ctx.addIssue({ code: 'custom', path: [b], message: `give either \`${a}\` or \`${b}\`, not both` });
    };
    both('body', 'body_text');
    if (t.group !== undefined) {
      both('url', 'group');
      for (const field of ['dedup_key', 'debounce'] as const) {
        if (t[field] !== undefined) {
          const message = 'names one task, and a group makes one per URL: enqueue each URL (GET /v1/groups/:name) with a key of its own';
          ctx.addIssue({ code: 'custom', path: [field], message });
        }
      }
    }
    if (t.tracestate !== undefined && t.traceparent === undefined)
      ctx.addIssue({ code: 'custom', path: ['tracestate'], message: 'goes with `traceparent`' });
    for (const name of [TRACEPARENT, TRACESTATE] as const) {
      const given = Object.keys(t.headers ?? {}).find((h) => h.toLowerCase() === name);
      if (t[name] !== undefined && given !== undefined)
        ctx.addIssue({ code: 'custom', path: [name], message: `give it either as the field \`${name}\` or in \`headers\`, not both` });
    }
    both('delay_ms', 'run_at');
    both('ttl_ms', 'expires_at');
    if (t.dedup_ttl_ms !== undefined && t.dedup_key === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['dedup_ttl_ms'],
        message: 'goes with `dedup_key`: it says how long the key is kept after the task finishes',
      });
    if (t.content_type !== undefined && t.body_text === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['content_type'],
        message: 'goes with `body_text` (a JSON `body` is sent as application/json)',
      });
    }
    const start = t.run_at !== undefined ? Date.parse(t.run_at) : Date.now() + (t.delay_ms ?? 0);
    const end = t.expires_at !== undefined ? Date.parse(t.expires_at) : t.ttl_ms !== undefined ? Date.now() + t.ttl_ms : null;
    if (end !== null && end <= start) {
      ctx.addIssue({
        code: 'custom',
        path: [t.expires_at !== undefined ? 'expires_at' : 'ttl_ms'],
        message: 'the task would expire before it may run: its deadline must come after its start',
      });
    }
    if (t.method === 'GET' && (t.body !== undefined || t.body_text !== undefined)) {
      ctx.addIssue({ code: 'custom', path: ['method'], message: 'a GET push carries no body; drop `body` or use another method' });
    }
  });
export type EnqueueInput = z.infer<typeof enqueueSchema>;

export const batchSchema = z
  .object({
    tasks: z.array(z.unknown()).min(1, 'needs at least one task').max(LIMITS.batchSize, `takes at most ${LIMITS.batchSize} tasks`),
  })
  .strict();

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
