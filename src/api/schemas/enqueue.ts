/**
 * The enqueue request's wire schema (snake_case, any-language friendly; docs/DESIGN.md §2). The
 * step that turns a valid one into a `NewTask` with every default resolved is resolve.ts.
 */
import { z } from 'zod';
import { backoffSchema, NAME_PATTERN } from '../../config-fields.ts';
import { rateSchema } from '../../core/queue-settings.ts';
import { parseTraceparent, TRACEPARENT, TRACESTATE, tracestateProblem } from '../../core/trace.ts';
import { HTTP_METHODS, isTaskId, LIMITS } from '../../core/types.ts';
import { isReservedHeader } from '../../protocol/headers.ts';
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
