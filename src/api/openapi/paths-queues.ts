import * as answers from '../answers.ts';
import { groupListQuerySchema, groupSchema, keyLimitSchema, pullSchema, scheduleListQuerySchema } from '../schemas/calls.ts';
import { GROUP_LIMIT, idParam, operation } from './operation.ts';
import { answer, json, ref } from './schemas.ts';

export function queuePaths(): Record<string, object> {
  return {
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
  };
}
