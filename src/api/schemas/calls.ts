/**
 * The wire schemas of the calls other than enqueue (snake_case): task listings, key limits,
 * schedules, the lease calls, pulling and waits.
 */
import { z } from 'zod';
import { NAME_PATTERN } from '../../config-fields.ts';
import { OVERLAP_POLICIES } from '../../core/schedule.ts';
import { textProblem } from '../../core/text.ts';
import { isTaskId, LIMITS, TASK_STATUSES } from '../../core/types.ts';
import { text } from './text.ts';

export const listQuerySchema = z
  .object({
    // Held to the same rules as at enqueue: no task can have another queue name or key.
    queue: z
      .string()
      .max(LIMITS.nameChars)
      .regex(NAME_PATTERN, 'must start with a letter or digit and use only letters, digits and _ . : -')
      .optional(),
    status: z.enum(TASK_STATUSES).optional(),
    concurrency_key: text().max(LIMITS.keyChars).optional(),
    cursor: z.string().max(64).optional(),
    limit: z.coerce.number().int().min(1).max(500).default(50),
  })
  .strict();

/** POST /v1/tasks/redrive: which dead tasks, and whether only to count them. */
export const redriveSchema = z
  .object({
    queue: listQuerySchema.shape.queue,
    url_prefix: text().min(1).max(LIMITS.urlChars).optional().describe('Only tasks whose URL starts with this, such as an origin.'),
    since: z.iso.datetime({ offset: true }).optional().describe('Only tasks that went dead at or after this time.'),
    until: z.iso.datetime({ offset: true }).optional().describe('Only tasks that went dead before this time.'),
    dry_run: z.boolean().default(false).describe('Count the matching dead tasks (up to 10,000), redrive none.'),
    after: z
      .string()
      .refine(isTaskId, 'must be a task id')
      .optional()
      .describe('Go on after this task id: the `last_id` of a call that answered `more`.'),
  })
  .strict()
  .refine((r) => r.since === undefined || r.until === undefined || Date.parse(r.since) < Date.parse(r.until), {
    path: ['until'],
    message: 'must be after since',
  });

/** A run-time key limit (PUT /v1/queues/:queue/keys/:key). */
export const keyLimitSchema = z.object({ limit: z.number().int().min(1).max(1_000_000) }).strict();

/** A schedule's name, held to the rules of queue names: it may become part of a concurrency key. */
export const scheduleName = listQuerySchema.shape.queue.unwrap();

/**
 * POST /v1/schedules. `task` is an enqueue request, checked by `checkTask` with the fields that
 * make no sense for a firing refused (routes/schedules.ts).
 */
export const scheduleSchema = z
  .object({
    name: scheduleName,
    cron: z.string().min(1, 'must not be empty').max(256),
    timezone: z.string().min(1).max(64).default('UTC'),
    overlap: z.enum(OVERLAP_POLICIES).default('skip'),
    paused: z.boolean().default(false),
    task: z.record(z.string(), z.unknown()),
  })
  .strict();

export const scheduleListQuerySchema = z
  .object({
    cursor: scheduleName.optional(),
    limit: z.coerce.number().int().min(1).max(500).default(100),
  })
  .strict();

/** An endpoint group's name (PUT /v1/groups/:name, an enqueue's `group`): held to the rules of queue names. */
export const groupName = scheduleName;

/** PUT /v1/groups/:name: the URLs, each checked as a task's url is (routes/groups.ts). */
export const groupSchema = z
  .object({
    urls: z
      .array(text().max(LIMITS.urlChars))
      .min(1, 'needs at least one URL')
      .max(LIMITS.groupUrls, `takes at most ${LIMITS.groupUrls} URLs`),
  })
  .strict();

export const groupListQuerySchema = scheduleListQuerySchema;

// The lease calls' bodies (routes/leases.ts); every field may be left out.

const optionalText = (max: number) =>
  z
    .string()
    .max(max)
    .refine((s) => textProblem(s) === null, 'must be well-formed text without NUL characters')
    .optional();

export const heartbeatSchema = z.object({ extend_ms: z.number().int().min(1_000).max(LIMITS.maxLeaseMs).optional() }).strict();
export const completeSchema = z.object({ result: z.unknown().optional() }).strict();
export const failSchema = z
  .object({
    error: optionalText(LIMITS.errorChars).default('failed by the lease holder'),
    retry: z.boolean().default(true),
    retry_after_ms: z.number().int().min(0).max(LIMITS.maxDelayMs).optional(),
  })
  .strict();
export const releaseSchema = z.object({ delay_ms: z.number().int().min(0).max(LIMITS.maxDelayMs).optional() }).strict();
/** POST /v1/queues/:queue/lease: what a pull consumer asks for. */
export const pullSchema = z
  .object({
    max: z.number().int().min(1).max(LIMITS.pullMax).default(1).describe('The most tasks to lease.'),
    wait_ms: z
      .number()
      .int()
      .min(0)
      .max(LIMITS.pullWaitMs)
      .default(0)
      .describe('How long to wait for a task when none is ready (a long poll); 0 answers at once.'),
    push_to: text()
      .max(LIMITS.urlChars)
      .refine((url) => URL.canParse(url) && /^https?:$/.test(new URL(url).protocol), 'must be an http or https URL')
      .optional()
      .describe(
        'Where the consumer will forward each task (`sluice listen`): each comes with the push Sluice would send there, signed for that URL as a forwarded push (issuer `sluice-forward`, keys at /.well-known/forward-jwks.json), which production receivers refuse. A loopback URL (127.0.0.0/8, [::1], localhost), or an origin the API key lists in `forward_to`.',
      ),
  })
  .strict();

export const waitSchema = z
  .object({
    /** The children to wait for; absent = every child (tasks enqueued with this task as parent_id). */
    children: z.array(z.string().refine(isTaskId, 'must be a task id')).min(1).max(1_000).optional(),
  })
  .strict();
