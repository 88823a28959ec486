/**
 * The OpenAPI 3.1 document, generated from the zod schemas the API validates with (no second
 * hand-written copy), served at /openapi.json and rendered at /docs.
 */
import { z } from 'zod';
import {
  batchSchema,
  enqueueSchema,
  keyLimitSchema,
  listQuerySchema,
  overridePatchSchema,
  scheduleListQuerySchema,
  scheduleSchema,
} from './schemas.ts';

/**
 * A request's JSON Schema. A default is said in the field's description rather than as
 * `default`: generated clients (openapi-typescript) make a field with a default required,
 * where a request may leave it out.
 */
const json = (schema: z.ZodType) =>
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

const problem = {
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

const str = { type: 'string' };
const int = { type: 'integer' };
const time = { type: 'string', format: 'date-time' };
const nullable = (schema: { type: string; format?: string }) => ({ ...schema, type: [schema.type, 'null'] });

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
const queue = {
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
const queueConcurrency = {
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

const task = {
  type: 'object',
  description: 'A task as the API returns it.',
  properties: TASK_FIELDS,
  required: Object.keys(TASK_FIELDS),
};

const taskDetail = {
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
const taskState = {
  type: 'object',
  properties: { id: str, queue: str, status: TASK_FIELDS.status },
  required: ['id', 'queue', 'status'],
};

const enqueued = {
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

const leaseEnded = {
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

const schedule = {
  type: 'object',
  description: 'A schedule: its cron expression and zone, the task it fires, and what its last slot did.',
  properties: SCHEDULE_FIELDS,
  required: Object.keys(SCHEDULE_FIELDS),
};

/** What a key without tasks:read sees of a schedule it pauses or resumes. */
const scheduleState = {
  type: 'object',
  properties: { name: str, paused: { type: 'boolean' }, next_fire_at: nullable(time) },
  required: ['name', 'paused', 'next_fire_at'],
};

/** POST /v1/schedules: its `task` is an enqueue request, less the fields a firing refuses. */
function scheduleRequest() {
  const body = json(scheduleSchema) as { properties: Record<string, object> };
  const task = {
    ...ref('EnqueueRequest'),
    description:
      'The task each firing enqueues, as POST /v1/tasks takes it, except delay_ms, run_at, expires_at, dedup_key and parent_id (refused); ' +
      'ttl_ms counts from each slot. With overlap `queue`, concurrency_key and concurrency_limit are refused too.',
  };
  return { ...body, properties: { ...body.properties, task } };
}

type Op = {
  id: string;
  summary: string;
  scope: string;
  body?: object;
  /** The body may be left out (lease calls: every field has a default). */
  bodyOptional?: boolean;
  query?: z.ZodObject;
  /** Request headers the operation reads. */
  headers?: object[];
  /** The success answer's schema; null = no body. */
  ok?: object | null;
  okStatus?: string;
  /** More success answers: status → schema (or null for no body). */
  also?: Record<string, object | null>;
};

function operation({ id, summary, scope, body, bodyOptional = false, query, headers = [], ok, okStatus = '200', also = {} }: Op) {
  const answer = (schema: object | null) => ({ description: 'OK', ...(schema ? { content: { 'application/json': { schema } } } : {}) });
  const parameters = [
    ...Object.entries(query?.shape ?? {}).map(([name, s]) => ({ name, in: 'query', required: false, schema: json(s as z.ZodType) })),
    ...headers,
  ];
  return {
    operationId: id,
    summary,
    security: [{ [scope === 'lease token' ? 'leaseToken' : 'apiKey']: [] }],
    description: `Requires: ${scope}.`,
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(body ? { requestBody: { required: !bodyOptional, content: { 'application/json': { schema: body } } } } : {}),
    responses: {
      [okStatus]: answer(ok === undefined ? { type: 'object' } : ok),
      ...Object.fromEntries(Object.entries(also).map(([status, schema]) => [status, answer(schema)])),
      '4XX': {
        description: 'A problem with the request',
        content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
      },
      '503': {
        description: 'The database does not answer (an outage, or no connection free in time): repeat after Retry-After',
        headers: { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } },
        content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
      },
    },
  };
}

/** An endpoint anyone may call. */
const open = (id: string, summary: string, type: string, schema: object, extra: Record<string, object> = {}) => ({
  get: {
    operationId: id,
    summary,
    security: [],
    responses: { '200': { description: 'OK', content: { [type]: { schema } } }, ...extra },
  },
});

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const preferHeader = {
  name: 'Prefer',
  in: 'header',
  required: false,
  description: '`return=minimal`: answer each task with its id, queue and status only (RFC 7240; `Preference-Applied` confirms it).',
  schema: { type: 'string' },
};
const idParam = (name: string) => ({ name, in: 'path', required: true, schema: { type: 'string' } });

export function openApiDocument(): object {
  const leaseCall = (id: string, summary: string, body: object, ok: object) => ({
    parameters: [idParam('lease_id')],
    post: operation({ id, summary, scope: 'lease token', body, bodyOptional: true, ok }),
  });
  const queueView = ref('Queue');
  return {
    openapi: '3.1.0',
    info: {
      title: 'Sluice',
      version: '1',
      description: 'Serverless task queue with signed HTTP push delivery and hard concurrency limits.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: '/', description: 'This Sluice' }],
    components: {
      schemas: {
        EnqueueRequest: json(enqueueSchema),
        Task: task,
        TaskDetail: taskDetail,
        TaskState: taskState,
        Problem: problem,
        QueueOverride: json(overridePatchSchema),
        Queue: queue,
        QueueConcurrency: queueConcurrency,
        ScheduleRequest: scheduleRequest(),
        Schedule: schedule,
        ScheduleState: scheduleState,
      },
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'An API key (sk_sluice_…).' },
        leaseToken: { type: 'http', scheme: 'bearer', description: 'The Sluice-Lease-Token of the push.' },
      },
    },
    paths: {
      '/v1/tasks': {
        post: operation({
          id: 'enqueueTask',
          summary: 'Enqueue a task (200 when an unfinished task with the same dedup_key is returned)',
          scope: 'tasks:write',
          body: ref('EnqueueRequest'),
          headers: [preferHeader],
          ok: enqueued,
          okStatus: '201',
          also: { '200': enqueued },
        }),
        get: operation({
          id: 'listTasks',
          summary: 'List tasks, newest first',
          scope: 'tasks:read',
          query: listQuerySchema,
          ok: {
            type: 'object',
            properties: { tasks: { type: 'array', items: ref('Task') }, next_cursor: nullable(str) },
            required: ['tasks', 'next_cursor'],
          },
        }),
      },
      '/v1/tasks/batch': {
        post: operation({
          id: 'enqueueTasks',
          summary: 'Enqueue up to 1,000 tasks, all or nothing',
          scope: 'tasks:write',
          body: { ...json(batchSchema), properties: { tasks: { type: 'array', maxItems: 1000, items: ref('EnqueueRequest') } } },
          headers: [preferHeader],
          ok: { type: 'object', properties: { tasks: { type: 'array', items: enqueued } }, required: ['tasks'] },
          okStatus: '201',
        }),
      },
      '/v1/tasks/{id}': {
        parameters: [idParam('id')],
        get: operation({ id: 'getTask', summary: 'A task, with its attempt history', scope: 'tasks:read', ok: ref('TaskDetail') }),
      },
      '/v1/tasks/{id}/children': {
        parameters: [idParam('id')],
        get: operation({
          id: 'listChildren',
          summary: 'Tasks enqueued with this one as parent_id (oldest first, up to 1,000)',
          scope: 'tasks:read',
          ok: { type: 'object', properties: { children: { type: 'array', items: ref('Task') } }, required: ['children'] },
        }),
      },
      '/v1/tasks/{id}/cancel': {
        parameters: [idParam('id')],
        post: operation({
          id: 'cancelTask',
          summary: 'Cancel a task (a key without tasks:read sees only its state)',
          scope: 'tasks:write',
          ok: { anyOf: [ref('Task'), ref('TaskState')] },
        }),
      },
      '/v1/tasks/{id}/retry': {
        parameters: [idParam('id')],
        post: operation({
          id: 'retryTask',
          summary: 'Redrive a dead task (a key without tasks:read sees only its state)',
          scope: 'tasks:write',
          ok: { anyOf: [ref('Task'), ref('TaskState')] },
        }),
      },
      '/v1/leases/{lease_id}/heartbeat': leaseCall(
        'heartbeatLease',
        'Extend a kept lease',
        { type: 'object', properties: { extend_ms: int } },
        { type: 'object', properties: { lease_id: str, task_id: str, expires_at: time }, required: ['lease_id', 'task_id', 'expires_at'] },
      ),
      '/v1/leases/{lease_id}/complete': leaseCall(
        'completeLease',
        'Finish the task',
        { type: 'object', properties: { result: {} } },
        leaseEnded,
      ),
      '/v1/leases/{lease_id}/fail': leaseCall(
        'failLease',
        'Fail the attempt',
        { type: 'object', properties: { error: str, retry: { type: 'boolean' }, retry_after_ms: int } },
        leaseEnded,
      ),
      '/v1/leases/{lease_id}/release': leaseCall(
        'releaseLease',
        'Give the task back without using an attempt',
        { type: 'object', properties: { delay_ms: int } },
        leaseEnded,
      ),
      '/v1/leases/{lease_id}/wait': leaseCall(
        'waitForChildren',
        'Wait for children (all, or those named): pushed again once they have finished; 409 recursive_wait_deadlock when it never could be',
        {
          type: 'object',
          properties: { children: { type: 'array', items: str, description: 'Child task ids; absent = every child.' } },
        },
        {
          type: 'object',
          properties: {
            task_id: str,
            status: { type: 'string', enum: ['waiting'] },
            waiting_on: { type: 'array', items: str },
            lent_queue: { type: 'boolean' },
            lent_key: { type: 'boolean' },
          },
          required: ['task_id', 'status', 'waiting_on', 'lent_queue', 'lent_key'],
        },
      ),
      '/v1/queues': {
        get: operation({
          id: 'listQueues',
          summary: 'Queues with their effective settings',
          scope: 'tasks:read',
          ok: { type: 'object', properties: { queues: { type: 'array', items: queueView } }, required: ['queues'] },
        }),
      },
      '/v1/queues/{queue}': {
        parameters: [idParam('queue')],
        get: operation({ id: 'getQueue', summary: 'A queue: settings with their sources, counts', scope: 'tasks:read', ok: queueView }),
        put: operation({
          id: 'updateQueue',
          summary: 'Override settings at run time (null removes one)',
          scope: 'admin',
          body: ref('QueueOverride'),
          ok: queueView,
        }),
        delete: operation({ id: 'resetQueue', summary: 'Drop the run-time overrides', scope: 'admin', ok: queueView }),
      },
      '/v1/queues/{queue}/pause': {
        parameters: [idParam('queue')],
        post: operation({ id: 'pauseQueue', summary: 'Stop claiming from the queue', scope: 'admin', ok: queueView }),
      },
      '/v1/queues/{queue}/resume': {
        parameters: [idParam('queue')],
        post: operation({ id: 'resumeQueue', summary: 'Claim from the queue again', scope: 'admin', ok: queueView }),
      },
      '/v1/queues/{queue}/concurrency': {
        parameters: [idParam('queue')],
        get: operation({
          id: 'getQueueConcurrency',
          summary: 'Limit, active and slot holders per level and key',
          scope: 'tasks:read',
          ok: ref('QueueConcurrency'),
        }),
      },
      '/v1/queues/{queue}/keys/{key}': {
        parameters: [idParam('queue'), idParam('key')],
        put: operation({
          id: 'setKeyLimit',
          summary: 'Set the limit of one key',
          scope: 'admin',
          body: json(keyLimitSchema),
          ok: {
            type: 'object',
            properties: { queue: str, key: str, limit: int, source: str },
            required: ['queue', 'key', 'limit', 'source'],
          },
        }),
        delete: operation({
          id: 'deleteKeyLimit',
          summary: 'Drop the limit of one key',
          scope: 'admin',
          ok: null as unknown as object,
          okStatus: '204',
        }),
      },
      '/v1/queues/{queue}/leases/{lease_id}/release': {
        parameters: [idParam('queue'), idParam('lease_id')],
        post: operation({
          id: 'forceReleaseLease',
          summary: 'Free a stuck slot: the task goes back to pending, its attempt given back',
          scope: 'admin',
          ok: {
            type: 'object',
            properties: { released: { type: 'boolean' }, task_id: str, lease_id: str },
            required: ['released', 'task_id', 'lease_id'],
          },
        }),
      },
      '/v1/schedules': {
        post: operation({
          id: 'createSchedule',
          summary: 'Create a schedule: a cron expression in a time zone that enqueues a task at each slot',
          scope: 'tasks:write',
          body: ref('ScheduleRequest'),
          ok: ref('Schedule'),
          okStatus: '201',
        }),
        get: operation({
          id: 'listSchedules',
          summary: 'List schedules by name',
          scope: 'tasks:read',
          query: scheduleListQuerySchema,
          ok: {
            type: 'object',
            properties: { schedules: { type: 'array', items: ref('Schedule') }, next_cursor: nullable(str) },
            required: ['schedules', 'next_cursor'],
          },
        }),
      },
      '/v1/schedules/{name}': {
        parameters: [idParam('name')],
        get: operation({ id: 'getSchedule', summary: 'A schedule', scope: 'tasks:read', ok: ref('Schedule') }),
        delete: operation({
          id: 'deleteSchedule',
          summary: 'Delete a schedule (the tasks it fired are left alone)',
          scope: 'tasks:write',
          ok: null as unknown as object,
          okStatus: '204',
        }),
      },
      '/v1/schedules/{name}/pause': {
        parameters: [idParam('name')],
        post: operation({
          id: 'pauseSchedule',
          summary: 'Stop firing (a key without tasks:read sees only its state)',
          scope: 'tasks:write',
          ok: { anyOf: [ref('Schedule'), ref('ScheduleState')] },
        }),
      },
      '/v1/schedules/{name}/resume': {
        parameters: [idParam('name')],
        post: operation({
          id: 'resumeSchedule',
          summary: 'Fire again from the next slot; slots passed while paused never fire',
          scope: 'tasks:write',
          ok: { anyOf: [ref('Schedule'), ref('ScheduleState')] },
        }),
      },
      '/v1/webhooks/secret': {
        get: operation({
          id: 'getWebhookSecret',
          summary: "The Standard Webhooks secret of a URL's endpoint (origin and path)",
          scope: 'admin',
          query: z.object({ url: z.string() }),
          ok: { type: 'object', properties: { endpoint: str, secret: str, next_secret: str }, required: ['endpoint', 'secret'] },
        }),
      },
      '/metrics': {
        get: (() => {
          const op = operation({ id: 'getMetrics', summary: 'Prometheus metrics (text format 0.0.4)', scope: 'metrics:read or admin' });
          const text = { description: 'OK', content: { 'text/plain': { schema: { type: 'string' } } } };
          return { ...op, responses: { ...op.responses, '200': text } };
        })(),
      },
      '/.well-known/jwks.json': open('getJwks', 'Public keys that sign pushes (current and next)', 'application/json', {
        type: 'object',
        properties: { keys: { type: 'array', items: { type: 'object' } } },
        required: ['keys'],
      }),
      '/healthz': open(
        'getHealth',
        'Health',
        'application/json',
        { type: 'object', properties: { status: str }, required: ['status'] },
        { '503': { description: 'The database does not answer', content: { 'application/json': { schema: { type: 'object' } } } } },
      ),
      '/openapi.json': open('getOpenApi', 'This document', 'application/json', {
        type: 'object',
        properties: { openapi: str, info: { type: 'object' }, paths: { type: 'object' } },
        required: ['openapi', 'info', 'paths'],
      }),
      '/docs': open('getDocs', 'A page that renders this document', 'text/html', { type: 'string' }),
    },
  };
}

export const DOCS_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sluice API</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
h2{border-bottom:1px solid #ddd;margin-top:2rem}.op{margin:.6rem 0;padding:.4rem .6rem;border-left:4px solid #4a7}
.m{font-weight:700;display:inline-block;min-width:4.5rem}code,pre{background:#f5f5f5;padding:.1rem .3rem}pre{padding:.6rem;overflow:auto}
.scope{color:#666;font-size:.9em}</style></head>
<body><h1>Sluice API</h1><p>Generated from <a href="/openapi.json">/openapi.json</a>.</p><div id="ops">Loading…</div>
<script>
fetch('/openapi.json').then(r=>r.json()).then(doc=>{
  const root=document.getElementById('ops');root.textContent='';
  const esc=s=>String(s).replace(/[&<>]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;'}[c]));
  for(const [path,item] of Object.entries(doc.paths)){
    for(const [m,op] of Object.entries(item)){ if(m==='parameters')continue;
      const d=document.createElement('div');d.className='op';
      d.innerHTML='<span class="m">'+m.toUpperCase()+'</span> <code>'+esc(path)+'</code> — '+esc(op.summary||'')+' <span class="scope">'+esc(op.description||'')+'</span>';
      root.appendChild(d);}}
  const h=document.createElement('h2');h.textContent='Schemas';root.appendChild(h);
  for(const [name,s] of Object.entries(doc.components.schemas)){
    const t=document.createElement('h3');t.textContent=name;root.appendChild(t);
    const p=document.createElement('pre');p.textContent=JSON.stringify(s,null,2);root.appendChild(p);}
});
</script></body></html>`;
