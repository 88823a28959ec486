/**
 * Keys limited to queues (SLUICE_API_KEYS `queues`, docs/DESIGN.md §8). A queue the caller names
 * (in the path, the query, an enqueue's `queue`) that its key may not use is 403: decided from
 * the request and the key alone, before the database is read, so the answer says nothing of
 * that queue. A task or schedule named by id or name is read first, and one of another queue is
 * 404, the very answer for one that does not exist. Listings show only the key's queues.
 */
import { NAME_PATTERN } from '../config-fields.ts';
import { type FieldIssue, NotFoundError, QueueNotAllowedError } from '../core/errors.ts';
import { isTaskId, LIMITS } from '../core/types.ts';
import type { Queryable } from '../db/db.ts';
import { type NewTask, parentsMissing } from '../db/new-task.ts';
import { taskQueue, unfinishedTaskQueues } from '../db/queue-scope.ts';
import { scheduleGet } from '../db/schedules.ts';
import { type QueueScope, queueAllowed } from '../security/api-keys.ts';

const limitedTo = (scope: readonly string[]) => `this API key is limited to the queues ${scope.join(', ')}`;

/** A queue the caller names: 403 unless its key may use it. */
export function requireQueue(scope: QueueScope, queue: string): void {
  if (scope !== null && !queueAllowed(scope, queue)) throw new QueueNotAllowedError(`${limitedTo(scope)}, not ${queue}`);
}

/** What spans every queue at once (metrics, endpoints' secrets): 403 for a key limited to queues. */
export function requireEveryQueue(scope: QueueScope, what: string): void {
  if (scope !== null) throw new QueueNotAllowedError(`${limitedTo(scope)}, and ${what} spans every queue`);
}

/** The queue an enqueue request names (`default` when none); `null` when not a valid name, which its own 400 reports. */
function requestedQueue(item: unknown): string | null {
  if (item === null || typeof item !== 'object' || Array.isArray(item)) return null;
  const given = (item as { queue?: unknown }).queue;
  const queue = given === undefined ? 'default' : given;
  return typeof queue === 'string' && queue.length <= LIMITS.nameChars && NAME_PATTERN.test(queue) ? queue : null;
}

/**
 * Refuses, in one 403 naming each, the enqueue requests bound for queues the key may not use.
 * Checked before anything else of them, so that no answer depends on such a queue's settings
 * (its default url, its lease). `pathOf(i)` is where the i-th request's queue is (`queue`,
 * `tasks.3.queue`, `task.queue`).
 */
export function requireEnqueueQueues(scope: QueueScope, items: readonly unknown[], pathOf: (i: number) => string): void {
  if (scope === null) return;
  const issues: FieldIssue[] = items.flatMap((item, i) => {
    const queue = requestedQueue(item);
    return queue !== null && !queueAllowed(scope, queue)
      ? [{ path: pathOf(i), message: `is ${queue}, a queue this API key may not use` }]
      : [];
  });
  if (issues.length > 0) {
    throw new QueueNotAllowedError(`${limitedTo(scope)}: ${issues.map((i) => `${i.path} ${i.message}`).join('; ')}`, issues);
  }
}

/**
 * A `parent_id` naming a task of a queue the key may not use is refused word for word as one
 * naming no unfinished task (db/enqueue.ts), every such id listed with the missing ones: naming
 * ids tells a limited key nothing of other queues' tasks.
 */
export async function requireParentsInScope(db: Queryable, scope: QueueScope, tasks: readonly Pick<NewTask, 'parentId'>[]): Promise<void> {
  if (scope === null) return;
  const parents = [...new Set(tasks.flatMap((t) => (t.parentId === null ? [] : [t.parentId])))];
  if (parents.length === 0) return;
  const queues = await unfinishedTaskQueues(db, parents);
  const missing = parents.filter((p) => {
    const queue = queues.get(p);
    return queue === undefined || !queueAllowed(scope, queue);
  });
  if (missing.length > 0) throw parentsMissing(missing);
}

/** A task read by id: itself when its key may use its queue, else 404 as for one that does not exist. */
export function visibleTask<T extends { queue: string }>(scope: QueueScope, task: T, idText: string): T {
  if (!queueAllowed(scope, task.queue)) throw new NotFoundError(`task ${idText}`);
  return task;
}

/** Before a change to a task named by id (cancel, redrive): 404 unless the key may use its queue. */
export async function requireTaskInScope(db: Queryable, scope: QueueScope, idText: string): Promise<void> {
  if (scope === null) return;
  const queue = isTaskId(idText) ? await taskQueue(db, idText) : null;
  if (queue === null || !queueAllowed(scope, queue)) throw new NotFoundError(`task ${idText}`);
}

/** Before anything is done to a schedule named by name: 404 unless the key may use its task's queue. */
export async function requireScheduleInScope(db: Queryable, scope: QueueScope, name: string): Promise<void> {
  if (scope === null) return;
  const schedule = await scheduleGet(db, name);
  if (!schedule || !queueAllowed(scope, schedule.template.queue)) throw new NotFoundError(`schedule ${name}`);
}
