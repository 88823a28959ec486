/**
 * What the task API (/v1/tasks) and the dashboard both do, one code path each: parse task ids
 * and list queries, read a task with its attempts, cancel, and redrive dead tasks (one, or all
 * that match a filter, in bounded batches). The routes turn results into JSON, the dashboard into HTML.
 */
import { NotFoundError, ValidationError } from '../core/errors.ts';
import { fieldIssues } from '../core/issues.ts';
import { isTaskId, type Task } from '../core/types.ts';
import type { Db } from '../db/db.ts';
import { type AttemptRecord, taskAttempts } from '../db/leases.ts';
import { type DeadFilter, taskCancel, taskGet, taskList, taskRedrive, taskRedriveMatching } from '../db/tasks.ts';
import type { QueueScope } from '../security/api-keys.ts';
import { requireQueue } from './queue-access.ts';
import type { OpsContext } from './queue-ops.ts';
import { listQuerySchema, redriveSchema } from './schemas/calls.ts';

/** The text as a task id, or `null` when it cannot name a task. */
export function taskId(text: string): string | null {
  return isTaskId(text) ? text : null;
}

function encodeCursor(id: string): string {
  return btoa(`before:${id}`).replace(/=+$/, '');
}

function decodeCursor(cursor: string): string {
  let text = '';
  try {
    text = atob(cursor);
  } catch {
    // Falls through to the error below.
  }
  const id = /^before:(\d+)$/.exec(text)?.[1];
  if (!id || taskId(id) === null) throw new ValidationError([{ path: 'cursor', message: 'is not a cursor this API returned' }]);
  return id;
}

/**
 * GET /v1/tasks: a page of tasks, newest first, filtered as the query says (validated as the API
 * does), of the queues `scope` admits. A queue named that it does not admit is 403, as any queue
 * a limited key names is: an empty page instead would pass for an empty queue.
 */
export async function listTasks(
  db: Db,
  query: Record<string, string>,
  scope: QueueScope = null,
): Promise<{ tasks: Task[]; nextCursor: string | null }> {
  const parsed = listQuerySchema.safeParse(query);
  if (!parsed.success) throw new ValidationError(fieldIssues(parsed.error));
  const q = parsed.data;
  if (q.queue !== undefined) requireQueue(scope, q.queue);
  const beforeId = q.cursor === undefined ? undefined : decodeCursor(q.cursor);
  const tasks = await taskList(db, {
    queue: q.queue,
    status: q.status,
    concurrencyKey: q.concurrency_key,
    beforeId,
    limit: q.limit,
    queues: scope,
  });
  const last = tasks.at(-1);
  return { tasks, nextCursor: tasks.length === q.limit && last ? encodeCursor(last.id) : null };
}

/** A task and every attempt it has ended (404 when there is no such task). */
export async function getTask(db: Db, idText: string): Promise<{ task: Task; attempts: AttemptRecord[] }> {
  const id = taskId(idText);
  const [task, attempts] = id === null ? [null, []] : await Promise.all([taskGet(db, id), taskAttempts(db, id)]);
  if (!task) throw new NotFoundError(`task ${idText}`);
  return { task, attempts };
}

export async function cancelTask(ops: OpsContext, idText: string): Promise<Task> {
  const id = taskId(idText);
  if (id === null) throw new NotFoundError(`task ${idText}`);
  const task = await taskCancel(ops.db, id);
  // A cancelled waiting task frees its slots, and a cancelled child may let its parent resume.
  ops.poke();
  return task;
}

/** A dead task pending again with fresh attempts (409 `not_dead` otherwise); wakes the dispatcher. */
export async function redriveTask(ops: OpsContext, idText: string): Promise<Task> {
  const id = taskId(idText);
  if (id === null) throw new NotFoundError(`task ${idText}`);
  const task = await taskRedrive(ops.db, id);
  ops.poke();
  return task;
}

/** Dead tasks redriven per statement, and statements per call: one call stays within a Worker's subrequests. */
export const REDRIVE_BATCH = 500;
export const REDRIVE_BATCHES_PER_CALL = 20;

export interface RedriveReport {
  redriven: number;
  /** Dead tasks left dead: another unfinished task of the queue has their dedup key. */
  skipped: number;
  /** More dead tasks may match: this call stopped after its batches. */
  more: boolean;
  /** The last dead task examined: a call that goes on from here passes it as `afterId`. */
  lastId: string | null;
}

/** Dead tasks one redrive call examines at most, and a dry run counts at most. */
export const REDRIVE_CAP = REDRIVE_BATCH * REDRIVE_BATCHES_PER_CALL;

/** What POST /v1/tasks/redrive asks for: the dead tasks it means, whether only to count them, and where to go on from. */
export interface RedriveSelection {
  filter: DeadFilter;
  dryRun: boolean;
  after: string | null;
}

/**
 * POST /v1/tasks/redrive's body (and the dashboard's form, which is the same request), read as
 * the API reads it: a 400 naming each bad field, a 403 for a queue `scope` does not admit; the
 * filter holds only the queues `scope` admits, so a key limited to queues redrives its own.
 */
export function redriveSelection(body: unknown, scope: QueueScope): RedriveSelection {
  const parsed = redriveSchema.safeParse(body);
  if (!parsed.success) throw new ValidationError(fieldIssues(parsed.error));
  const r = parsed.data;
  if (r.queue !== undefined) requireQueue(scope, r.queue);
  return {
    filter: {
      queue: r.queue,
      urlPrefix: r.url_prefix,
      since: r.since === undefined ? undefined : new Date(r.since),
      until: r.until === undefined ? undefined : new Date(r.until),
      queues: scope,
    },
    dryRun: r.dry_run,
    after: r.after ?? null,
  };
}

/**
 * Redrives every dead task matching `filter`, oldest first (after `afterId` when given), in
 * batches of `REDRIVE_BATCH`, at most `REDRIVE_BATCHES_PER_CALL` batches (10,000 tasks) per
 * call; `more` says to call again, with `lastId` as `afterId`: a call that started from the
 * oldest again would examine the same tasks that stayed dead (their dedup key held) and never
 * get past 10,000 of them. Each batch is one statement that moves past the ids it examined, so a
 * task that dies again meanwhile is not redriven twice by one call.
 */
export async function redriveMatching(ops: OpsContext, filter: DeadFilter, afterId: string | null = null): Promise<RedriveReport> {
  const report: RedriveReport = { redriven: 0, skipped: 0, more: true, lastId: afterId };
  try {
    for (let batch = 0; batch < REDRIVE_BATCHES_PER_CALL && report.more; batch++) {
      const step = await taskRedriveMatching(ops.db, filter, report.lastId, REDRIVE_BATCH);
      report.redriven += step.redriven;
      report.skipped += step.examined - step.redriven;
      report.more = step.examined === REDRIVE_BATCH;
      report.lastId = step.lastId ?? report.lastId;
    }
  } finally {
    // Batches that committed before a failure are redriven all the same: wake the dispatcher.
    if (report.redriven > 0) ops.poke();
  }
  return report;
}
