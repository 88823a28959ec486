/**
 * The OpenAPI document's paths of tasks and their leases.
 */
import { z } from 'zod';
import * as answers from '../answers.ts';
import {
  completeSchema,
  failSchema,
  heartbeatSchema,
  listQuerySchema,
  redriveSchema,
  releaseSchema,
  waitSchema,
} from '../schemas/calls.ts';
import { batchSchema } from '../schemas/enqueue.ts';
import { idParam, leaseCall, operation, preferHeader, traceHeaders } from './operation.ts';
import { answer, json, ref } from './schemas.ts';

export function taskPaths(): Record<string, object> {
  return {
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
  };
}
