/**
 * The wire schemas the API validates with (snake_case, any-language friendly), and the step
 * that turns a valid enqueue request into a `NewTask` with every default resolved.
 */
import { z } from 'zod';
import { backoffSchema, type Config, NAME_PATTERN, queueDefaults } from '../config.ts';
import type { FieldIssue } from '../core/errors.ts';
import { HTTP_METHODS, LIMITS, TASK_STATUSES } from '../core/types.ts';
import type { NewTask } from '../db/tasks.ts';
import { isReservedHeader } from '../sdk/protocol/headers.ts';
import { checkTarget } from '../security/targets.ts';

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

const headersSchema = z
  .record(
    z.string().regex(HEADER_NAME, 'is not a valid header name'),
    z
      .string()
      .max(LIMITS.headerValueChars)
      .regex(/^[^\r\n\0]*$/, 'must not contain line breaks'),
  )
  .superRefine((headers, ctx) => {
    const names = Object.keys(headers);
    if (names.length > LIMITS.headerCount) ctx.addIssue({ code: 'custom', message: `at most ${LIMITS.headerCount} headers` });
    for (const name of names) {
      if (isReservedHeader(name)) {
        const hint = name.toLowerCase() === 'content-type' ? ' (use `content_type` with `body_text`)' : '';
        ctx.addIssue({ code: 'custom', path: [name], message: `is set by Sluice and cannot be given${hint}` });
      }
    }
  });

const timestamp = z.iso.datetime({ offset: true, error: 'must be an RFC 3339 timestamp, e.g. 2026-01-31T12:00:00Z' });

export const enqueueSchema = z
  .object({
    url: z.string().max(LIMITS.urlChars).optional(),
    queue: z
      .string()
      .max(LIMITS.nameChars)
      .regex(NAME_PATTERN, 'must start with a letter or digit and use only letters, digits and _ . : -')
      .default('default'),
    body: z.unknown().optional(),
    body_text: z.string().optional(),
    content_type: z.string().min(1).max(255).optional(),
    headers: headersSchema.optional(),
    method: z.enum(HTTP_METHODS).default('POST'),
    concurrency_key: z.string().max(LIMITS.keyChars).nullable().optional(),
    concurrency_limit: z.number().int().min(1).max(1_000_000).optional(),
    priority: z.number().int().min(-1_000_000).max(1_000_000).default(0),
    delay_ms: z.number().int().min(0).max(LIMITS.maxDelayMs).optional(),
    run_at: timestamp.optional(),
    ttl_ms: z.number().int().min(1).max(LIMITS.maxDelayMs).optional(),
    expires_at: timestamp.optional(),
    max_attempts: z.number().int().min(1).max(LIMITS.maxAttempts).optional(),
    backoff: backoffSchema.optional(),
    timeout_ms: z.number().int().min(100).max(LIMITS.maxLeaseMs).optional(),
    lease_ms: z.number().int().min(1_000).max(LIMITS.maxLeaseMs).optional(),
    dedup_key: z.string().min(1).max(LIMITS.keyChars).optional(),
  })
  .strict()
  .superRefine((t, ctx) => {
    const both = (a: keyof typeof t, b: keyof typeof t) => {
      if (t[a] !== undefined && t[b] !== undefined)
        ctx.addIssue({ code: 'custom', path: [b], message: `give either \`${a}\` or \`${b}\`, not both` });
    };
    both('body', 'body_text');
    both('delay_ms', 'run_at');
    both('ttl_ms', 'expires_at');
    if (t.content_type !== undefined && t.body_text === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['content_type'],
        message: 'goes with `body_text` (a JSON `body` is sent as application/json)',
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

export const listQuerySchema = z
  .object({
    queue: z.string().max(LIMITS.nameChars).optional(),
    status: z.enum(TASK_STATUSES).optional(),
    concurrency_key: z.string().max(LIMITS.keyChars).optional(),
    cursor: z.string().max(64).optional(),
    limit: z.coerce.number().int().min(1).max(500).default(50),
  })
  .strict();

/**
 * Resolves an enqueue request against its queue's defaults. Returns the task, or the
 * problems (paths relative to the task) that only the configuration can reveal.
 */
export function resolveTask(input: EnqueueInput, config: Config): { task: NewTask } | { issues: FieldIssue[] } {
  const defaults = queueDefaults(config, input.queue);
  const issues: FieldIssue[] = [];
  const url = input.url ?? defaults.url;
  if (url === null) {
    issues.push({ path: 'url', message: `is required: queue "${input.queue}" has no default url` });
  } else {
    const target = checkTarget(url, config.allowPrivateTargets);
    if (!target.ok) issues.push({ path: 'url', message: target.reason });
  }
  const leaseMs = input.lease_ms ?? defaults.leaseMs;
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
    body = JSON.stringify(input.body);
  }
  if (body !== null && new TextEncoder().encode(body).length > LIMITS.taskBodyBytes) {
    issues.push({ path: input.body_text !== undefined ? 'body_text' : 'body', message: `is larger than ${LIMITS.taskBodyBytes} bytes` });
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
  if (issues.length > 0 || url === null) return { issues };
  return {
    task: {
      queue: input.queue,
      url,
      method: input.method,
      headers: input.headers ?? {},
      body,
      contentType,
      concurrencyKey: input.concurrency_key ?? null,
      concurrencyLimit: input.concurrency_limit ?? null,
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
    },
  };
}
