/**
 * What the API answers, once, as zod schemas: the one source of every answer's shape.
 *
 * - The OpenAPI document's answers are generated from these (openapi/schemas.ts).
 * - The routes and views build values of their output types (`satisfies` / return types), so
 *   a route that adds, drops or retypes a field does not compile.
 * - The SDK's wire types (src/protocol/wire.ts) are written out by hand, so that the SDK
 *   needs no zod; test/unit/wire.test.ts holds each of them equal to the type here.
 *
 * Requests have their own schemas, the ones the API validates with (schemas/).
 */
import { z } from 'zod';
import { ENDPOINT_STATES } from '../core/outcome.ts';
import { KEY_STRATEGIES } from '../core/queue-settings.ts';
import { OVERLAP_POLICIES } from '../core/schedule.ts';
import { ATTEMPT_OUTCOMES, HTTP_METHODS, TASK_STATUSES } from '../core/types.ts';

/** Components of the OpenAPI document: an answer registered here is referenced by its name. */
export const components = z.registry<{ id: string; description?: string }>();

const time = z.iso.datetime();

export const problem = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.int(),
    code: z.string(),
    detail: z.string(),
    issues: z
      .array(z.object({ path: z.string(), message: z.string() }))
      .readonly()
      .optional(),
  })
  .register(components, { id: 'Problem', description: 'RFC 9457 problem document; `issues` names each wrong field.' });
const SOURCES = ['override', 'env', 'task', 'default'] as const;

/** A rate limit (src/core/limits.ts `Rate`), or none. */
const rate = z
  .object({ limit: z.int(), period_ms: z.int(), burst: z.int().optional() })
  .nullable()
  .describe(
    'At most `limit` pushes in any window of `period_ms`; with `burst`, up to `burst` at once, refilling at `limit` per `period_ms`.',
  );

export const taskState = z
  .object({ id: z.string(), queue: z.string(), status: z.enum(TASK_STATUSES) })
  .register(components, { id: 'TaskState', description: 'What a key without tasks:read sees of a task it did not just create.' });

export const task = z
  .object({
    id: z.string(),
    queue: z.string(),
    status: z.enum(TASK_STATUSES),
    url: z.string().nullable().describe('Where it is pushed; null for a task of a pull queue that names none.'),
    method: z.enum(HTTP_METHODS),
    concurrency_key: z.string().nullable(),
    concurrency_limit: z.int().nullable(),
    rate_limit: rate,
    parent_id: z.string().nullable(),
    resumes: z.int(),
    priority: z.int(),
    run_at: time,
    expires_at: time.nullable(),
    attempts: z.int(),
    max_attempts: z.int(),
    timeout_ms: z.int(),
    lease_ms: z.int(),
    dedup_key: z.string().nullable(),
    dedup_ttl_ms: z.int().nullable().describe('How long it keeps its dedup_key after it finishes; null: only while unfinished.'),
    lease: z.object({ id: z.string(), leased_at: time, expires_at: time }).nullable().describe('The lease held now, if any.'),
    cancel_requested: z.boolean(),
    result: z.string().nullable(),
    last_error: z.string().nullable(),
    last_status: z.int().nullable(),
    created_at: time,
    updated_at: time,
    finished_at: time.nullable(),
    schedule: z
      .object({ name: z.string(), slot: time })
      .nullable()
      .describe('The schedule and slot that enqueued the task; null for a task enqueued by a call.'),
    callback_url: z.string().nullable().describe('Told when the task succeeds (a task of the queue `callbacks`).'),
    failure_callback_url: z.string().nullable().describe('Told when the task goes dead.'),
  })
  .register(components, { id: 'Task', description: 'A task as the API returns it.' });

export const attempt = z.object({
  attempt: z.int(),
  lease_id: z.string(),
  started_at: time,
  ended_at: time,
  outcome: z.enum(ATTEMPT_OUTCOMES),
  http_status: z.int().nullable(),
  duration_ms: z.int().nullable(),
  error: z.string().nullable(),
});

/** A JSON body as JSON, anything else as text (task-answers.ts `bodyView`). */
const body = {
  body: z.unknown().optional().describe('The JSON body, when it is JSON.'),
  body_text: z.string().nullable().optional().describe('The body as text, when it is not JSON.'),
};

export const taskDetail = task
  .extend({
    content_type: z.string(),
    header_names: z.array(z.string()).describe('Header values may be credentials for the target: only their names are shown.'),
    ...body,
    attempt_history: z.array(attempt),
  })
  .register(components, { id: 'TaskDetail', description: 'One task with its body, header names and every attempt.' });

/**
 * An enqueued task: whole, or only its id, queue and status when the request said
 * `Prefer: return=minimal` and for a deduplicated hit shown to a key without tasks:read.
 */
const deduplicated = z.object({
  deduplicated: z.boolean(),
  debounced: z.boolean().optional().describe('For a task with `debounce`: whether it joined an earlier task (the one answered).'),
  skipped: z
    .boolean()
    .optional()
    .describe(
      "Under the queue's `key_strategy: cancel_newest`: true when its concurrency key had an unfinished task, which is answered; nothing was made.",
    ),
});
export const enqueued = z
  .union([z.intersection(task, deduplicated), z.intersection(taskState, deduplicated)])
  .describe(
    'The task; only its id, queue and status when the request said `Prefer: return=minimal`, ' +
      'and for a deduplicated hit shown to a key without tasks:read.',
  );

export const taskList = z.object({ tasks: z.array(task), next_cursor: z.string().nullable() });
export const enqueuedBatch = z.object({ tasks: z.array(enqueued) });
export const children = z.object({ children: z.array(task) });
export const taskOrState = z.union([task, taskState]);

export const pulledTask = z
  .object({
    id: z.string(),
    queue: z.string(),
    concurrency_key: z.string().nullable(),
    attempt: z.int().describe('This attempt, from 1.'),
    max_attempts: z.int(),
    resumes: z.int().describe('Times the task was resumed after waiting on its children.'),
    ...body,
    content_type: z.string().nullable().describe("The body's media type; null when it has none."),
    headers: z
      .record(z.string(), z.string())
      .describe("The task's own headers; with this attempt's `traceparent` when it runs in a trace."),
    lease: z
      .object({
        id: z.string(),
        token: z.string().describe("Authorizes the lease calls (`Authorization: Bearer <token>`), as a push's Sluice-Lease-Token."),
        expires_at: time,
      })
      .describe('Held as after a push answered `Sluice-Ack: lease`: heartbeat, then complete, fail or release.'),
    push: z
      .object({
        url: z.string(),
        method: z.enum(HTTP_METHODS),
        headers: z.record(z.string(), z.string()),
        body_text: z.string().nullable().describe('The exact body to send.'),
      })
      .optional()
      .describe('With `push_to`: the signed push Sluice would send there.'),
  })
  .register(components, { id: 'PulledTask', description: 'A task leased by a pull, with its lease.' });
export const pulled = z.object({ tasks: z.array(pulledTask).describe('Empty when nothing was ready within `wait_ms`.') });

export const leaseExtended = z.object({ lease_id: z.string(), task_id: z.string(), expires_at: time });
export const leaseEnded = z.object({
  task_id: z.string(),
  status: z.enum(TASK_STATUSES).nullable(),
  repeated: z
    .boolean()
    .optional()
    .describe(
      'True when the call repeats one that ended the lease already (`complete`, `fail`, `release` sent again after a lost answer): nothing more was written.',
    ),
});
export const leaseWaiting = z.object({
  task_id: z.string(),
  status: z.literal('waiting'),
  waiting_on: z.array(z.string()),
  lent_queue: z.boolean(),
  lent_key: z.boolean(),
});

const keyStrategyAbout =
  'What an enqueue does to a concurrency key with unfinished tasks: `queue` (default) waits behind them; `cancel_in_progress` cancels them, a leased one at once; `cancel_newest` makes nothing and answers the unfinished task (`skipped`); `replace_pending` cancels the pending ones.';

/** A setting's value and where it comes from (src/core/limits.ts `Source`). */
const sourced = <T extends z.ZodType>(value: T) => z.object({ value, source: z.enum(SOURCES) });

export const queue = z
  .object({
    name: z.string(),
    concurrency: sourced(z.int().nullable()),
    key_concurrency: sourced(z.int().nullable()),
    priority: sourced(z.int()),
    paused: sourced(z.boolean()),
    rate: sourced(rate),
    key_rate: sourced(rate),
    adaptive: sourced(z.boolean()).describe('Limits that learn from the endpoint (AIMD): the configured ones are ceilings.'),
    adaptive_min: sourced(z.int()).describe('The lowest limit an adaptive queue learns (default 1).'),
    pull: sourced(z.boolean()).describe('Consumed by pulling (POST /v1/queues/{queue}/lease), not pushed.'),
    key_strategy: sourced(z.enum(KEY_STRATEGIES)).describe(keyStrategyAbout),
    key_from: z.string().nullable(),
    url: z.string().nullable(),
    max_attempts: z.int(),
    lease_ms: z.int(),
    timeout_ms: z.int(),
    counts: z.object({ pending: z.int(), leased: z.int(), waiting: z.int(), dead: z.int() }),
  })
  .register(components, {
    id: 'Queue',
    description: 'A queue: each limit with its value and where it comes from, its defaults, and counts.',
  });

export const queueList = z.object({ queues: z.array(queue) });

const slot = z.object({ task_id: z.string(), lease_id: z.string(), leased_at: time, expires_at: time });
const level = z.object({ limit: z.int().nullable(), source: z.enum(SOURCES), active: z.int() });
/** A queue's or a key's level, with what it learnt from its endpoint (0016_levels.sql). */
const learningLevel = level.extend({
  effective: z
    .int()
    .nullable()
    .describe('The limit the claim applies: `limit`, or on an adaptive queue the lower one it has learnt (null: none).'),
  held_until: time.nullable().describe('A Retry-After from one of its tasks holds the level until then.'),
  last_move: z.object({ reason: z.string(), at: time }).nullable().describe('Why and when the learnt limit or the hold last moved.'),
});
/** A level's rate in force, where it comes from, and its grants still inside their period. */
const rateInUse = z.object({ value: rate, source: z.enum(SOURCES), used: z.int() });
const waitingHolders = z.int().describe('Tasks waiting on children that hold a slot here (they did not lend it to a child).');

export const queueConcurrency = z
  .object({
    queue: z.string(),
    cluster: level,
    adaptive: z.boolean().describe('Whether the queue learns its limits from its endpoint (AIMD).'),
    key_strategy: sourced(z.enum(KEY_STRATEGIES)).describe(keyStrategyAbout),
    queue_level: learningLevel.extend({ paused: z.boolean(), rate: rateInUse, waiting: waitingHolders }),
    keys: z.array(learningLevel.extend({ key: z.string(), rate: rateInUse, waiting: waitingHolders, slots: z.array(slot) })),
    keyless: z.object({ active: z.int(), slots: z.array(slot) }),
  })
  .register(components, { id: 'QueueConcurrency', description: "Who holds a queue's slots, per level and key." });

export const keyLimit = z.object({ queue: z.string(), key: z.string(), limit: z.int(), source: z.literal('override') });
export const forcedRelease = z.object({ released: z.literal(true), task_id: z.string(), lease_id: z.string() });

export const group = z
  .object({
    name: z.string(),
    urls: z
      .array(z.string())
      .describe('As the target check wrote each: a task that names the group becomes one task per URL, in this order.'),
    created_at: time,
    updated_at: time,
  })
  .register(components, { id: 'Group', description: 'An endpoint group: a name for the URLs an enqueue fans out to.' });
export const groupList = z.object({ groups: z.array(group), next_cursor: z.string().nullable() });

export const schedule = z
  .object({
    name: z.string(),
    cron: z.string(),
    timezone: z.string(),
    overlap: z.enum(OVERLAP_POLICIES),
    paused: z.boolean(),
    next_fire_at: time.nullable(),
    last_slot_at: time.nullable(),
    last_outcome: z.enum(['fired', 'skipped']).nullable(),
    last_task_id: z.string().nullable(),
    fired: z.int(),
    skipped: z.int(),
    missed: z.int(),
    task: z
      .object({
        queue: z.string(),
        url: z.string().nullable(),
        method: z.enum(HTTP_METHODS),
        concurrency_key: z.string().nullable(),
        concurrency_limit: z.int().nullable(),
        rate_limit: rate,
        priority: z.int(),
        ttl_ms: z.int().nullable(),
        max_attempts: z.int(),
        backoff: z.object({ initial_ms: z.int(), max_ms: z.int(), factor: z.number(), jitter: z.number() }),
        timeout_ms: z.int(),
        lease_ms: z.int(),
        content_type: z.string(),
        header_names: z.array(z.string()),
        ...body,
      })
      .describe('The task each firing enqueues, every default resolved; header values are not shown.'),
    created_at: time,
    updated_at: time,
  })
  .register(components, {
    id: 'Schedule',
    description: 'A schedule: its cron expression and zone, the task it fires, and what its last slot did.',
  });

export const scheduleState = z
  .object({ name: z.string(), paused: z.boolean(), next_fire_at: time.nullable() })
  .register(components, { id: 'ScheduleState', description: 'What a key without tasks:read sees of a schedule it pauses or resumes.' });

export const scheduleList = z.object({ schedules: z.array(schedule), next_cursor: z.string().nullable() });
export const scheduleOrState = z.union([schedule, scheduleState]);

export const endpoint = z
  .object({
    origin: z.string().describe('Scheme, host and port, as `new URL(url).origin` says it.'),
    state: z
      .enum(ENDPOINT_STATES)
      .describe('`paused`: its tasks wait, using no attempt; `probing`: one task is out to see whether it answers again.'),
    consecutive_failures: z.int().describe('Failures (no connection, a timeout, a 5xx) since its last 2xx.'),
    attempts_5m: z.int().describe('Pushes that ended in the last five minutes (whole minutes: between four and five).'),
    failures_5m: z.int(),
    last_error: z.string().nullable(),
    last_error_at: time.nullable(),
    paused_until: time
      .nullable()
      .describe('Paused: when its next probe may go; probing: when the probe lease ends; null when paused by hand.'),
    paused_by: z.enum(['failures', 'hand']).nullable(),
    held_until: time.nullable().describe('A Retry-After from it holds its tasks until then.'),
  })
  .register(components, { id: 'Endpoint', description: 'An endpoint origin Sluice pushes to, and its health.' });
export const endpointList = z.object({ endpoints: z.array(endpoint) });

export const redriven = z.object({
  matched: z.int().describe('Dead tasks examined that match (a dry run: how many match, up to 10,000).'),
  redriven: z.int().describe('Pending again, with a fresh attempt budget; 0 in a dry run.'),
  skipped: z.int().describe('Left dead: another unfinished task of their queue holds their dedup key.'),
  more: z.boolean().describe('More may match: call again with `after` set to `last_id`.'),
  last_id: z.string().nullable(),
  dry_run: z.boolean(),
});

export const webhookSecret = z.object({ endpoint: z.string(), secret: z.string(), next_secret: z.string().optional() });
export const forwarding = z.object({
  url: z.string(),
  issuer: z.string().describe('The `iss` of forwarded pushes: never the issuer of production pushes.'),
  jwks_url: z.string().describe('The public keys of forwarded pushes: never listed in /.well-known/jwks.json.'),
  webhook_secret: z
    .string()
    .nullable()
    .describe(
      "The Standard Webhooks secret of pushes forwarded to `url`'s endpoint: no endpoint's own secret. Null when pushes carry no Standard Webhooks signature.",
    ),
  next_webhook_secret: z.string().optional().describe('While the master secret rotates: the secret under the next one.'),
});
export const health = z.object({ status: z.enum(['ok', 'unavailable']), detail: z.string().optional() });

/** The value an answer's schema describes: what a route builds. */
export type Answer<T extends z.ZodType> = z.output<T>;

export type TaskAnswer = z.output<typeof task>;
export type TaskStateAnswer = z.output<typeof taskState>;
export type TaskDetailAnswer = z.output<typeof taskDetail>;
export type AttemptAnswer = z.output<typeof attempt>;
export type QueueAnswer = z.output<typeof queue>;
export type ScheduleAnswer = z.output<typeof schedule>;
