/**
 * The OpenAPI 3.1 document, served at /openapi.json and rendered at /docs: its requests come from
 * the zod schemas the API validates with, its answers from the zod schemas of answers.ts: no
 * second copy of either (openapi-schemas.ts turns both into JSON Schema).
 */

import { z } from 'zod';
import { queueSettingsPatchSchema } from '../core/queue-settings.ts';
import { FORWARD_JWKS_PATH } from '../protocol/signature.ts';
import * as answers from './answers.ts';
import { answer, answerComponents, json, ref, scheduleRequest } from './openapi-schemas.ts';
import {
  completeSchema,
  failSchema,
  groupListQuerySchema,
  groupSchema,
  heartbeatSchema,
  keyLimitSchema,
  listQuerySchema,
  pullSchema,
  redriveSchema,
  releaseSchema,
  scheduleListQuerySchema,
  waitSchema,
} from './schemas/calls.ts';
import { batchSchema, enqueueSchema } from './schemas/enqueue.ts';

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
  /**
   * What a key limited to queues (SLUICE_API_KEYS `queues`) meets here: when it is refused
   * (`forbidden`, a 403 `queue_not_allowed` of its own), and what it sees (`sees`).
   */
  queueLimit?: { forbidden?: string; sees?: string };
};

/** A group is no queue's: a key limited to queues may not read or change groups. */
const GROUP_LIMIT = { forbidden: "always: a group's URLs receive tasks of any queue" };

const PROBLEM = { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } };

function operation({
  id,
  summary,
  scope,
  body,
  bodyOptional = false,
  query,
  headers = [],
  ok,
  okStatus = '200',
  also = {},
  queueLimit = {},
}: Op) {
  const answer = (schema: object | null) => ({ description: 'OK', ...(schema ? { content: { 'application/json': { schema } } } : {}) });
  const parameters = [
    ...Object.entries(query?.shape ?? {}).map(([name, s]) => ({ name, in: 'query', required: false, schema: json(s as z.ZodType) })),
    ...headers,
  ];
  return {
    operationId: id,
    summary,
    security: [{ [scope === 'lease token' ? 'leaseToken' : 'apiKey']: [] }],
    description: [
      `Requires: ${scope}.`,
      ...(queueLimit.forbidden ? [`A key limited to queues gets 403 queue_not_allowed ${queueLimit.forbidden}.`] : []),
      ...(queueLimit.sees ? [`A key limited to queues ${queueLimit.sees}.`] : []),
    ].join(' '),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(body ? { requestBody: { required: !bodyOptional, content: { 'application/json': { schema: body } } } } : {}),
    responses: {
      [okStatus]: answer(ok === undefined ? { type: 'object' } : ok),
      ...Object.fromEntries(Object.entries(also).map(([status, schema]) => [status, answer(schema)])),
      ...(queueLimit.forbidden
        ? {
            '403': {
              description: `The key lacks the scope (forbidden), or is limited to queues: queue_not_allowed ${queueLimit.forbidden}`,
              content: PROBLEM,
            },
          }
        : {}),
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

const preferHeader = {
  name: 'Prefer',
  in: 'header',
  required: false,
  description: '`return=minimal`: answer each task with its id, queue and status only (RFC 7240; `Preference-Applied` confirms it).',
  schema: { type: 'string' },
};
/** W3C Trace Context on a request: an enqueue's tasks run in it; a call in a trace is a span of it (Node). */
const traceHeaders = [
  {
    name: 'traceparent',
    in: 'header',
    required: false,
    description:
      'W3C Trace Context. On an enqueue: the trace each task without one of its own runs in (a malformed one is ignored). A request in a trace is a span of it where the server exports spans (the Node server, over OTLP).',
    schema: { type: 'string' },
  },
  {
    name: 'tracestate',
    in: 'header',
    required: false,
    description: 'W3C Trace Context vendor data, with `traceparent`.',
    schema: { type: 'string' },
  },
];
const idParam = (name: string) => ({ name, in: 'path', required: true, schema: { type: 'string' } });

export function openApiDocument(): object {
  const leaseCall = (id: string, summary: string, body: object, ok: object) => ({
    parameters: [idParam('lease_id')],
    post: operation({ id, summary, scope: 'lease token', body, bodyOptional: true, headers: traceHeaders, ok }),
  });
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
        QueueOverride: json(queueSettingsPatchSchema),
        ScheduleRequest: scheduleRequest(),
        ...answerComponents(),
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
          summary:
            'Enqueue a task (200 when an existing task answers: one with the same dedup_key, unfinished or finished within its dedup_ttl_ms, or the one a debounce joined)',
          scope: 'tasks:write',
          body: ref('EnqueueRequest'),
          headers: [preferHeader, ...traceHeaders],
          ok: answer(
            z.union([answers.enqueued, answers.enqueuedBatch]).describe('The task; one per URL, as {"tasks": [...]}, for a `group`.'),
          ),
          okStatus: '201',
          also: { '200': answer(answers.enqueued) },
          queueLimit: {
            forbidden: 'for a task of a queue not among them',
            sees: 'gets 400 for a parent_id of a task of another queue, as for a missing one',
          },
        }),
        get: operation({
          id: 'listTasks',
          summary: 'List tasks, newest first',
          scope: 'tasks:read',
          query: listQuerySchema,
          ok: answer(answers.taskList),
          queueLimit: { forbidden: 'for a `queue` not among them', sees: 'lists only tasks of its queues' },
        }),
      },
      '/v1/tasks/batch': {
        post: operation({
          id: 'enqueueTasks',
          summary: 'Enqueue up to 1,000 tasks, all or nothing',
          scope: 'tasks:write',
          body: { ...json(batchSchema), properties: { tasks: { type: 'array', maxItems: 1000, items: ref('EnqueueRequest') } } },
          headers: [preferHeader, ...traceHeaders],
          ok: answer(answers.enqueuedBatch),
          okStatus: '201',
          queueLimit: { forbidden: 'for any task of a queue not among them (each named in issues; nothing written)' },
        }),
      },
      '/v1/tasks/redrive': {
        post: operation({
          id: 'redriveTasks',
          summary: 'Redrive the dead tasks that match (queue, URL prefix, when they died), or count them (dry_run)',
          scope: 'tasks:write',
          body: json(redriveSchema),
          bodyOptional: true,
          ok: answer(answers.redriven),
          queueLimit: { forbidden: 'for a `queue` not among them', sees: 'redrives only tasks of its queues' },
        }),
      },
      '/v1/tasks/{id}': {
        parameters: [idParam('id')],
        get: operation({
          id: 'getTask',
          summary: 'A task, with its attempt history',
          scope: 'tasks:read',
          ok: answer(answers.taskDetail),
          queueLimit: { sees: 'sees a task of another queue as missing (404)' },
        }),
      },
      '/v1/tasks/{id}/children': {
        parameters: [idParam('id')],
        get: operation({
          id: 'listChildren',
          summary: 'Tasks enqueued with this one as parent_id (oldest first, up to 1,000)',
          scope: 'tasks:read',
          ok: answer(answers.children),
          queueLimit: { sees: 'sees a task of another queue as missing (404), and only children of its queues' },
        }),
      },
      '/v1/tasks/{id}/cancel': {
        parameters: [idParam('id')],
        post: operation({
          id: 'cancelTask',
          summary: 'Cancel a task (a key without tasks:read sees only its state)',
          scope: 'tasks:write',
          ok: answer(answers.taskOrState),
          queueLimit: { sees: 'sees a task of another queue as missing (404)' },
        }),
      },
      '/v1/tasks/{id}/retry': {
        parameters: [idParam('id')],
        post: operation({
          id: 'retryTask',
          summary: 'Redrive a dead task (a key without tasks:read sees only its state)',
          scope: 'tasks:write',
          ok: answer(answers.taskOrState),
          queueLimit: { sees: 'sees a task of another queue as missing (404)' },
        }),
      },
      '/v1/leases/{lease_id}/heartbeat': leaseCall(
        'heartbeatLease',
        'Extend a kept lease',
        json(heartbeatSchema),
        answer(answers.leaseExtended),
      ),
      '/v1/leases/{lease_id}/complete': leaseCall('completeLease', 'Finish the task', json(completeSchema), answer(answers.leaseEnded)),
      '/v1/leases/{lease_id}/fail': leaseCall('failLease', 'Fail the attempt', json(failSchema), answer(answers.leaseEnded)),
      '/v1/leases/{lease_id}/release': leaseCall(
        'releaseLease',
        'Give the task back without using an attempt',
        json(releaseSchema),
        answer(answers.leaseEnded),
      ),
      '/v1/leases/{lease_id}/wait': leaseCall(
        'waitForChildren',
        'Wait for children (all, or those named): pushed again once they have finished; 409 recursive_wait_deadlock when it never could be',
        json(waitSchema),
        answer(answers.leaseWaiting),
      ),
      '/v1/queues': {
        get: operation({
          id: 'listQueues',
          summary: 'Queues with their effective settings',
          scope: 'tasks:read',
          ok: answer(answers.queueList),
          queueLimit: { sees: 'lists only its queues' },
        }),
      },
      '/v1/queues/{queue}': {
        parameters: [idParam('queue')],
        get: operation({
          id: 'getQueue',
          summary: 'A queue: settings with their sources, counts',
          scope: 'tasks:read',
          ok: answer(answers.queue),
          queueLimit: { forbidden: 'for a queue not among them' },
        }),
        put: operation({
          id: 'updateQueue',
          summary: 'Override settings at run time (null removes one)',
          scope: 'admin',
          body: ref('QueueOverride'),
          ok: answer(answers.queue),
          queueLimit: { forbidden: 'for a queue not among them' },
        }),
        delete: operation({
          id: 'resetQueue',
          summary: 'Drop the run-time overrides',
          scope: 'admin',
          ok: answer(answers.queue),
          queueLimit: { forbidden: 'for a queue not among them' },
        }),
      },
      '/v1/queues/{queue}/pause': {
        parameters: [idParam('queue')],
        post: operation({
          id: 'pauseQueue',
          summary: 'Stop claiming from the queue',
          scope: 'admin',
          ok: answer(answers.queue),
          queueLimit: { forbidden: 'for a queue not among them' },
        }),
      },
      '/v1/queues/{queue}/resume': {
        parameters: [idParam('queue')],
        post: operation({
          id: 'resumeQueue',
          summary: 'Claim from the queue again',
          scope: 'admin',
          ok: answer(answers.queue),
          queueLimit: { forbidden: 'for a queue not among them' },
        }),
      },
      '/v1/queues/{queue}/lease': {
        parameters: [idParam('queue')],
        post: operation({
          id: 'pullTasks',
          summary: 'Lease ready tasks of a pull queue, waiting up to wait_ms for one (a long poll)',
          scope: 'tasks:pull',
          body: json(pullSchema),
          bodyOptional: true,
          ok: answer(answers.pulled),
          queueLimit: { forbidden: 'for a queue not among them' },
        }),
      },
      '/v1/queues/{queue}/concurrency': {
        parameters: [idParam('queue')],
        get: operation({
          id: 'getQueueConcurrency',
          summary: 'Limit, active and slot holders per level and key',
          scope: 'tasks:read',
          ok: answer(answers.queueConcurrency),
          queueLimit: { forbidden: 'for a queue not among them' },
        }),
      },
      '/v1/queues/{queue}/keys/{key}': {
        parameters: [idParam('queue'), idParam('key')],
        put: operation({
          id: 'setKeyLimit',
          summary: 'Set the limit of one key',
          scope: 'admin',
          body: json(keyLimitSchema),
          ok: answer(answers.keyLimit),
          queueLimit: { forbidden: 'for a queue not among them' },
        }),
        delete: operation({
          id: 'deleteKeyLimit',
          summary: 'Drop the limit of one key',
          scope: 'admin',
          ok: null as unknown as object,
          okStatus: '204',
          queueLimit: { forbidden: 'for a queue not among them' },
        }),
      },
      '/v1/queues/{queue}/leases/{lease_id}/release': {
        parameters: [idParam('queue'), idParam('lease_id')],
        post: operation({
          id: 'forceReleaseLease',
          summary: 'Free a stuck slot: the task goes back to pending, its attempt given back',
          scope: 'admin',
          ok: answer(answers.forcedRelease),
          queueLimit: { forbidden: 'for a queue not among them' },
        }),
      },
      '/v1/schedules': {
        post: operation({
          id: 'createSchedule',
          summary: 'Create a schedule: a cron expression in a time zone that enqueues a task at each slot',
          scope: 'tasks:write',
          body: ref('ScheduleRequest'),
          ok: answer(answers.schedule),
          okStatus: '201',
          queueLimit: { forbidden: 'for a `task.queue` not among them' },
        }),
        get: operation({
          id: 'listSchedules',
          summary: 'List schedules by name',
          scope: 'tasks:read',
          query: scheduleListQuerySchema,
          ok: answer(answers.scheduleList),
          queueLimit: { sees: 'lists only schedules whose task is for one of its queues' },
        }),
      },
      '/v1/schedules/{name}': {
        parameters: [idParam('name')],
        get: operation({
          id: 'getSchedule',
          summary: 'A schedule',
          scope: 'tasks:read',
          ok: answer(answers.schedule),
          queueLimit: { sees: 'sees a schedule whose task is for another queue as missing (404)' },
        }),
        delete: operation({
          id: 'deleteSchedule',
          summary: 'Delete a schedule (the tasks it fired are left alone)',
          scope: 'tasks:write',
          ok: null as unknown as object,
          okStatus: '204',
          queueLimit: { sees: 'sees a schedule whose task is for another queue as missing (404)' },
        }),
      },
      '/v1/schedules/{name}/pause': {
        parameters: [idParam('name')],
        post: operation({
          id: 'pauseSchedule',
          summary: 'Stop firing (a key without tasks:read sees only its state)',
          scope: 'tasks:write',
          ok: answer(answers.scheduleOrState),
          queueLimit: { sees: 'sees a schedule whose task is for another queue as missing (404)' },
        }),
      },
      '/v1/schedules/{name}/resume': {
        parameters: [idParam('name')],
        post: operation({
          id: 'resumeSchedule',
          summary: 'Fire again from the next slot; slots passed while paused never fire',
          scope: 'tasks:write',
          ok: answer(answers.scheduleOrState),
          queueLimit: { sees: 'sees a schedule whose task is for another queue as missing (404)' },
        }),
      },
      '/v1/groups': {
        get: operation({
          id: 'listGroups',
          summary: 'List endpoint groups by name',
          scope: 'admin',
          query: groupListQuerySchema,
          ok: answer(answers.groupList),
          queueLimit: GROUP_LIMIT,
        }),
      },
      '/v1/groups/{name}': {
        parameters: [idParam('name')],
        get: operation({
          id: 'getGroup',
          summary: 'An endpoint group',
          scope: 'admin',
          ok: answer(answers.group),
          queueLimit: GROUP_LIMIT,
        }),
        put: operation({
          id: 'putGroup',
          summary: "Create an endpoint group (201) or replace its URLs (200); each URL is checked as a task's url is",
          scope: 'admin',
          body: json(groupSchema),
          ok: answer(answers.group),
          okStatus: '201',
          also: { '200': answer(answers.group) },
          queueLimit: GROUP_LIMIT,
        }),
        delete: operation({
          id: 'deleteGroup',
          summary: 'Delete an endpoint group (the tasks it made are left alone)',
          scope: 'admin',
          ok: null as unknown as object,
          okStatus: '204',
          queueLimit: GROUP_LIMIT,
        }),
      },
      '/v1/webhooks/secret': {
        get: operation({
          id: 'getWebhookSecret',
          summary: "The Standard Webhooks secret of a URL's endpoint (origin and path)",
          scope: 'admin',
          query: z.object({ url: z.string() }),
          ok: answer(answers.webhookSecret),
          queueLimit: { forbidden: 'always: an endpoint belongs to no one queue' },
        }),
      },
      '/v1/webhooks/forwarding': {
        get: operation({
          id: 'getForwarding',
          summary: 'What verifies pushes a pull forwards to a URL (push_to): issuer, keys, Standard Webhooks secret',
          scope: 'tasks:pull',
          query: z.object({ url: z.string() }),
          ok: answer(answers.forwarding),
        }),
      },
      '/v1/endpoints': {
        get: operation({
          id: 'listEndpoints',
          summary: 'Endpoint origins and their health: failures in a row, the last five minutes, a pause, a hold',
          scope: 'tasks:read',
          ok: answer(answers.endpointList),
          queueLimit: { forbidden: 'always: an origin belongs to no one queue' },
        }),
      },
      '/v1/endpoints/{origin}/pause': {
        parameters: [{ ...idParam('origin'), description: 'The origin, URL-encoded: https%3A%2F%2Fexample.com' }],
        post: operation({
          id: 'pauseEndpoint',
          summary: 'Pause an origin by hand: its tasks wait, using no attempt, and no probe goes until a resume',
          scope: 'admin',
          ok: answer(answers.endpoint),
          queueLimit: { forbidden: 'always: an origin belongs to no one queue' },
        }),
      },
      '/v1/endpoints/{origin}/resume': {
        parameters: [{ ...idParam('origin'), description: 'The origin, URL-encoded: https%3A%2F%2Fexample.com' }],
        post: operation({
          id: 'resumeEndpoint',
          summary: 'Resume an origin (paused by hand or by failures, or held by a Retry-After): its waiting tasks are due now',
          scope: 'admin',
          ok: answer(answers.endpoint),
          queueLimit: { forbidden: 'always: an origin belongs to no one queue' },
        }),
      },
      '/metrics': {
        get: (() => {
          const op = operation({
            id: 'getMetrics',
            summary: 'Prometheus metrics (text format 0.0.4)',
            scope: 'metrics:read or admin',
            queueLimit: { forbidden: 'always: a scrape spans every queue' },
          });
          const text = { description: 'OK', content: { 'text/plain': { schema: { type: 'string' } } } };
          return { ...op, responses: { ...op.responses, '200': text } };
        })(),
      },
      '/.well-known/jwks.json': open('getJwks', 'Public keys that sign pushes (current and next)', 'application/json', {
        type: 'object',
        properties: { keys: { type: 'array', items: { type: 'object' } } },
        required: ['keys'],
      }),
      [FORWARD_JWKS_PATH]: open(
        'getForwardJwks',
        'Public keys that sign forwarded pushes (push_to): never production pushes',
        'application/json',
        {
          type: 'object',
          properties: { keys: { type: 'array', items: { type: 'object' } } },
          required: ['keys'],
        },
      ),
      '/healthz': open('getHealth', 'Health', 'application/json', answer(answers.health), {
        '503': {
          description: 'The database does not answer, or its schema is missing or behind',
          content: { 'application/json': { schema: answer(answers.health) } },
        },
      }),
      '/openapi.json': open('getOpenApi', 'This document', 'application/json', {
        type: 'object',
        properties: { openapi: { type: 'string' }, info: { type: 'object' }, paths: { type: 'object' } },
        required: ['openapi', 'info', 'paths'],
      }),
      '/docs': open('getDocs', 'A page that renders this document', 'text/html', { type: 'string' }),
    },
  };
}
