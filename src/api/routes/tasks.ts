/** /v1/tasks: enqueue (one or a batch), read, list, cancel. */
import { Hono } from 'hono';
import type { Config } from '../../config.ts';
import { type FieldIssue, NotFoundError, ValidationError } from '../../core/errors.ts';
import { fieldIssues } from '../../core/issues.ts';
import { LIMITS } from '../../core/types.ts';
import { type Poke, pokeForTasks } from '../../core/wake.ts';
import { type AttemptRecord, taskAttempts } from '../../db/leases.ts';
import { type Enqueued, type NewTask, taskCancel, taskGet, taskInsertMany, taskList, taskRedrive } from '../../db/tasks.ts';
import { requireScope } from '../auth.ts';
import { readJson } from '../body.ts';
import type { AppEnv } from '../context.ts';
import { batchSchema, checkTask, listQuerySchema } from '../schemas.ts';
import { taskStateView, taskView } from '../views.ts';

export const tasks = new Hono<AppEnv>();

tasks.post('/', requireScope('tasks:write'), async (c) => {
  const raw = await readJson(c.req.raw, LIMITS.requestBytes);
  const [task] = validateTasks([raw], c.var.config, '');
  const [result] = await taskInsertMany(c.var.db, [task as NewTask]);
  pokeForNew(c.var.poke, [result as Enqueued]);
  return c.json(enqueuedView(result as Enqueued, c.var.canRead), result?.deduplicated ? 200 : 201);
});

tasks.post('/batch', requireScope('tasks:write'), async (c) => {
  const raw = await readJson(c.req.raw, LIMITS.batchRequestBytes);
  const parsed = batchSchema.safeParse(raw);
  if (!parsed.success) throw new ValidationError(fieldIssues(parsed.error));
  const newTasks = validateTasks(parsed.data.tasks, c.var.config, 'tasks');
  const results = await taskInsertMany(c.var.db, newTasks);
  pokeForNew(c.var.poke, results);
  return c.json({ tasks: results.map((r) => enqueuedView(r, c.var.canRead)) }, 201);
});

tasks.get('/', requireScope('tasks:read'), async (c) => {
  const parsed = listQuerySchema.safeParse(c.req.query());
  if (!parsed.success) throw new ValidationError(fieldIssues(parsed.error));
  const q = parsed.data;
  const beforeId = q.cursor === undefined ? undefined : decodeCursor(q.cursor);
  const rows = await taskList(c.var.db, { queue: q.queue, status: q.status, concurrencyKey: q.concurrency_key, beforeId, limit: q.limit });
  const last = rows.at(-1);
  return c.json({ tasks: rows.map((t) => taskView(t)), next_cursor: rows.length === q.limit && last ? encodeCursor(last.id) : null });
});

tasks.get('/:id', requireScope('tasks:read'), async (c) => {
  const id = taskId(c.req.param('id'));
  const [task, attempts] = id === null ? [null, []] : await Promise.all([taskGet(c.var.db, id), taskAttempts(c.var.db, id)]);
  if (!task) throw new NotFoundError(`task ${c.req.param('id')}`);
  return c.json({ ...taskView(task, { body: true }), attempt_history: attempts.map(attemptView) });
});

tasks.post('/:id/cancel', requireScope('tasks:write'), async (c) => {
  const id = taskId(c.req.param('id'));
  if (id === null) throw new NotFoundError(`task ${c.req.param('id')}`);
  const task = await taskCancel(c.var.db, id);
  return c.json(c.var.canRead ? taskView(task) : taskStateView(task));
});

/** Validates every item first, so a batch with one bad task writes nothing. */
function validateTasks(items: readonly unknown[], config: Config, prefix: string): NewTask[] {
  const issues: FieldIssue[] = [];
  const out: NewTask[] = [];
  items.forEach((item, i) => {
    const checked = checkTask(item, config, prefix === '' ? '' : `${prefix}.${i}`);
    if ('issues' in checked) issues.push(...checked.issues);
    else out.push(checked.task);
  });
  if (issues.length > 0) throw new ValidationError(issues);
  return out;
}

tasks.post('/:id/retry', requireScope('tasks:write'), async (c) => {
  const id = taskId(c.req.param('id'));
  if (id === null) throw new NotFoundError(`task ${c.req.param('id')}`);
  const task = await taskRedrive(c.var.db, id);
  c.var.poke();
  return c.json(c.var.canRead ? taskView(task) : taskStateView(task));
});

/** Tells the dispatcher when the tasks just written come due (a deduplicated hit adds nothing). */
function pokeForNew(poke: (p: Poke) => void, results: readonly Enqueued[]): void {
  const p = pokeForTasks(
    results.filter((r) => !r.deduplicated).map((r) => r.task.runAt),
    Date.now(),
  );
  if (p) poke(p);
}

/** A new task is the caller's own; a dedup hit may be another caller's, shown whole only to readers. */
function enqueuedView(e: Enqueued, canRead: boolean) {
  return { ...(e.deduplicated && !canRead ? taskStateView(e.task) : taskView(e.task)), deduplicated: e.deduplicated };
}

/** Task ids are positive 64-bit integers; anything else cannot name a task. */
function taskId(text: string): string | null {
  return /^[1-9]\d{0,18}$/.test(text) && BigInt(text) <= 9_223_372_036_854_775_807n ? text : null;
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

function attemptView(a: AttemptRecord) {
  return {
    attempt: a.attempt,
    lease_id: a.leaseId,
    started_at: a.startedAt.toISOString(),
    ended_at: a.endedAt.toISOString(),
    outcome: a.outcome,
    http_status: a.httpStatus,
    duration_ms: a.durationMs,
    error: a.error,
  };
}
