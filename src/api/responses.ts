/**
 * What the API answers, as JSON Schema for the OpenAPI document (openapi.ts): the views of
 * src/api/views.ts and the routes, written out field by field, and the request helpers the
 * document shares with them. test/helpers/contract.ts checks every answer a test receives
 * against these.
 */
import { z } from 'zod';
import { scheduleSchema } from './schemas.ts';

/** A reference to one of the document's component schemas. */
export const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

/**
 * A request's JSON Schema. A default is said in the field's description rather than as
 * `default`: generated clients (openapi-typescript) make a field with a default required,
 * where a request may leave it out.
 */
export const json = (schema: z.ZodType) =>
  withoutDefaults(z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any', target: 'draft-2020-12' }));

function withoutDefaults<T>(node: T): T {
  if (Array.isArray(node)) return node.map(withoutDefaults) as T;
  if (node === null || typeof node !== 'object') return node;
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(node)) if (name !== 'default') out[name] = withoutDefaults(value);
  if ('default' in node) {
    const said = `Default: ${JSON.stringify((node as { default: unknown }).default)}.`;
    out.description = typeof out.description === 'string' ? `${out.description} ${said}` : said;
  }
  return out as T;
}

export const problem = {
  type: 'object',
  description: 'RFC 9457 problem document; `issues` names each wrong field.',
  properties: {
    type: { type: 'string' },
    title: { type: 'string' },
    status: { type: 'integer' },
    code: { type: 'string' },
    detail: { type: 'string' },
    issues: { type: 'array', items: { type: 'object', properties: { path: { type: 'string' }, message: { type: 'string' } } } },
  },
  required: ['type', 'title', 'status', 'code', 'detail'],
};

export const str = { type: 'string' };
export const int = { type: 'integer' };
export const time = { type: 'string', format: 'date-time' };
export const nullable = (schema: { type: string; format?: string }) => ({ ...schema, type: [schema.type, 'null'] });

const lease = {
  type: ['object', 'null'],
  description: 'The lease held now, if any.',
  properties: { id: str, leased_at: time, expires_at: time },
  required: ['id', 'leased_at', 'expires_at'],
};

const attempt = {
  type: 'object',
  properties: {
    attempt: int,
    lease_id: str,
    started_at: time,
    ended_at: time,
    outcome: { type: 'string', enum: ['succeeded', 'retry', 'deferred', 'released', 'waiting', 'dead', 'cancelled'] },
    http_status: nullable(int),
    duration_ms: nullable(int),
    error: nullable(str),
  },
  required: ['attempt', 'lease_id', 'started_at', 'ended_at', 'outcome', 'http_status', 'duration_ms', 'error'],
};

/** A rate limit (src/core/limits.ts `Rate`), or none. */
const rateOrNull = {
  type: ['object', 'null'],
  properties: { limit: int, period_ms: int },
  required: ['limit', 'period_ms'],
  description: 'At most `limit` pushes in any window of `period_ms`.',
};

/** Where a setting's value comes from (src/core/limits.ts `Source`). */
const sourced = (value: object) => ({
  type: 'object',
  properties: { value, source: { type: 'string', enum: ['override', 'env', 'task', 'default'] } },
  required: ['value', 'source'],
});

/** A queue as src/api/routes/queues.ts `queueView` answers it. */
export const queue = {
  type: 'object',
  description: 'A queue: each limit with its value and where it comes from, its defaults, and counts.',
  properties: {
    name: str,
    concurrency: sourced(nullable(int)),
    key_concurrency: sourced(nullable(int)),
    priority: sourced(int),
    paused: sourced({ type: 'boolean' }),
    rate: sourced(rateOrNull),
    key_rate: sourced(rateOrNull),
    key_from: nullable(str),
    url: nullable(str),
    max_attempts: int,
    lease_ms: int,
    timeout_ms: int,
    counts: {
      type: 'object',
      properties: { pending: int, leased: int, waiting: int, dead: int },
      required: ['pending', 'leased', 'waiting', 'dead'],
    },
  },
  required: [
    'name',
    'concurrency',
    'key_concurrency',
    'priority',
    'paused',
    'rate',
    'key_rate',
    'key_from',
    'url',
    'max_attempts',
    'lease_ms',
    'timeout_ms',
    'counts',
  ],
};

const slot = {
  type: 'object',
  properties: { task_id: str, lease_id: str, leased_at: time, expires_at: time },
  required: ['task_id', 'lease_id', 'leased_at', 'expires_at'],
};
const level = (extra: Record<string, object> = {}) => ({
  type: 'object',
  properties: { limit: nullable(int), source: str, active: int, ...extra },
  required: ['limit', 'source', 'active', ...Object.keys(extra)],
});

/** A level's rate in force, where it comes from, and its grants still inside their period. */
const rateInUse = {
  type: 'object',
  properties: { value: rateOrNull, source: { type: 'string', enum: ['override', 'env', 'task', 'default'] }, used: int },
  required: ['value', 'source', 'used'],
};

/** Tasks waiting on children that still hold a slot of the level; the claim counts them with `active`. */
const waitingHolders = { ...int, description: 'Tasks waiting on children that hold a slot here (they did not lend it to a child).' };

/** Who holds a queue's slots, per level and key (src/api/routes/queues.ts, `/concurrency`). */
export const queueConcurrency = {
  type: 'object',
  properties: {
    queue: str,
    cluster: level(),
    queue_level: level({ paused: { type: 'boolean' }, rate: rateInUse, waiting: waitingHolders }),
    keys: { type: 'array', items: level({ key: str, rate: rateInUse, waiting: waitingHolders, slots: { type: 'array', items: slot } }) },
    keyless: { type: 'object', properties: { active: int, slots: { type: 'array', items: slot } }, required: ['active', 'slots'] },
  },
  required: ['queue', 'cluster', 'queue_level', 'keys', 'keyless'],
};

/** Fields every task view carries (src/api/views.ts `taskView`). */
const TASK_FIELDS = {
  id: str,
  queue: str,
  status: { type: 'string', enum: ['pending', 'leased', 'waiting', 'succeeded', 'dead', 'cancelled', 'expired'] },
  url: str,
  method: { type: 'string', enum: ['POST', 'PUT', 'PATCH', 'DELETE', 'GET'] },
  concurrency_key: nullable(str),
  concurrency_limit: nullable(int),
  rate_limit: rateOrNull,
  parent_id: nullable(str),
  resumes: int,
  priority: int,
  run_at: time,
  expires_at: nullable(time),
  attempts: int,
  max_attempts: int,
  timeout_ms: int,
  lease_ms: int,
  dedup_key: nullable(str),
  lease,
  cancel_requested: { type: 'boolean' },
  result: nullable(str),
  last_error: nullable(str),
  last_status: nullable(int),
  created_at: time,
  updated_at: time,
  finished_at: nullable(time),
  schedule: {
    type: ['object', 'null'],
    description: 'The schedule and slot that enqueued the task; null for a task enqueued by a call.',
    properties: { name: str, slot: time },
    required: ['name', 'slot'],
  },
};

export const task = {
  type: 'object',
  description: 'A task as the API returns it.',
  properties: TASK_FIELDS,
  required: Object.keys(TASK_FIELDS),
};

export const taskDetail = {
  type: 'object',
  description: 'One task with its body, header names and every attempt.',
  properties: {
    ...TASK_FIELDS,
    content_type: str,
    header_names: { type: 'array', items: str },
    body: { description: 'The JSON body, when it is JSON.' },
    body_text: nullable(str),
    attempt_history: { type: 'array', items: attempt },
  },
  required: [...Object.keys(TASK_FIELDS), 'content_type', 'header_names', 'attempt_history'],
};

/** What a key without tasks:read sees of a task it did not just create. */
export const taskState = {
  type: 'object',
  properties: { id: str, queue: str, status: TASK_FIELDS.status },
  required: ['id', 'queue', 'status'],
};

export const enqueued = {
  description:
    'The task; only its id, queue and status when the request said `Prefer: return=minimal`, ' +
    'and for a deduplicated hit shown to a key without tasks:read.',
  anyOf: [
    {
      allOf: [
        { $ref: '#/components/schemas/Task' },
        { type: 'object', properties: { deduplicated: { type: 'boolean' } }, required: ['deduplicated'] },
      ],
    },
    { allOf: [taskState, { type: 'object', properties: { deduplicated: { type: 'boolean' } }, required: ['deduplicated'] }] },
  ],
};

export const leaseEnded = {
  type: 'object',
  properties: { task_id: str, status: nullable(str), repeated: { type: 'boolean' } },
  required: ['task_id', 'status'],
};

const SCHEDULE_TASK_FIELDS = {
  queue: str,
  url: str,
  method: TASK_FIELDS.method,
  concurrency_key: nullable(str),
  concurrency_limit: nullable(int),
  rate_limit: rateOrNull,
  priority: int,
  ttl_ms: nullable(int),
  max_attempts: int,
  backoff: {
    type: 'object',
    properties: { initial_ms: int, max_ms: int, factor: { type: 'number' }, jitter: { type: 'number' } },
    required: ['initial_ms', 'max_ms', 'factor', 'jitter'],
  },
  timeout_ms: int,
  lease_ms: int,
  content_type: str,
  header_names: { type: 'array', items: str },
};

/** A schedule as src/api/routes/schedules.ts `scheduleView` answers it. */
const SCHEDULE_FIELDS = {
  name: str,
  cron: str,
  timezone: str,
  overlap: { type: 'string', enum: ['skip', 'queue', 'allow'] },
  paused: { type: 'boolean' },
  next_fire_at: nullable(time),
  last_slot_at: nullable(time),
  last_outcome: { type: ['string', 'null'], enum: ['fired', 'skipped', null] },
  last_task_id: nullable(str),
  fired: int,
  skipped: int,
  missed: int,
  task: {
    type: 'object',
    description: 'The task each firing enqueues, every default resolved; header values are not shown.',
    properties: {
      ...SCHEDULE_TASK_FIELDS,
      body: { description: 'The JSON body, when it is JSON.' },
      body_text: nullable(str),
    },
    required: Object.keys(SCHEDULE_TASK_FIELDS),
  },
  created_at: time,
  updated_at: time,
};

export const schedule = {
  type: 'object',
  description: 'A schedule: its cron expression and zone, the task it fires, and what its last slot did.',
  properties: SCHEDULE_FIELDS,
  required: Object.keys(SCHEDULE_FIELDS),
};

/** What a key without tasks:read sees of a schedule it pauses or resumes. */
export const scheduleState = {
  type: 'object',
  properties: { name: str, paused: { type: 'boolean' }, next_fire_at: nullable(time) },
  required: ['name', 'paused', 'next_fire_at'],
};

/** POST /v1/schedules: its `task` is an enqueue request, less the fields a firing refuses. */
export function scheduleRequest() {
  const body = json(scheduleSchema) as { properties: Record<string, object> };
  const task = {
    ...ref('EnqueueRequest'),
    description:
      'The task each firing enqueues, as POST /v1/tasks takes it, except delay_ms, run_at, expires_at, dedup_key and parent_id (refused); ' +
      'ttl_ms counts from each slot. With overlap `queue`, concurrency_key and concurrency_limit are refused too.',
  };
  return { ...body, properties: { ...body.properties, task } };
}
