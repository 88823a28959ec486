/** /v1/tasks: enqueue (one or a batch), read, list, cancel, redrive (the last four shared with the dashboard: task-ops.ts). */
import { type Context, Hono } from 'hono';
import { type FieldIssue, ValidationError } from '../../core/errors.ts';
import { fieldIssues } from '../../core/issues.ts';
import { LIMITS } from '../../core/types.ts';
import { type Poke, pokeForTasks, pokeLeaseEnded } from '../../core/wake.ts';
import { type TaskRef, taskInsertMany, taskInsertManyRefs } from '../../db/enqueue.ts';
import type { Enqueued, NewTask } from '../../db/new-task.ts';
import { taskChildren } from '../../db/waits.ts';
import type { Answer, children as childList, enqueued, enqueuedBatch, taskList } from '../answers.ts';
import { requireScope } from '../auth.ts';
import { prefersMinimal, readJson } from '../body.ts';
import type { AppEnv } from '../context.ts';
import { expandGroups } from '../groups.ts';
import { requireUrlOrPull } from '../pull.ts';
import { requireEnqueueQueues, requireParentsInScope, requireTaskInScope, visibleTask } from '../queue-access.ts';
import { batchSchema } from '../schemas/enqueue.ts';
import { checkTask } from '../schemas/resolve.ts';
import { taskDetailView, taskStateView, taskView } from '../task-answers.ts';
import { cancelTask, getTask, listTasks, redriveTask } from '../task-ops.ts';
import { inheritTrace, requestTrace } from '../trace.ts';

export const tasks = new Hono<AppEnv>();

tasks.post('/', requireScope('tasks:write'), async (c) => {
  const raw = await readJson(c.req.raw, LIMITS.requestBytes);
  const views = await enqueue(c, await validateTasks(c, [inheritTrace(raw, trace(c))], ''));
  // A task naming a group is one per URL (api/groups.ts): answered as a batch is.
  if ((raw as { group?: unknown }).group !== undefined) return c.json({ tasks: views } satisfies Answer<typeof enqueuedBatch>, 201);
  const [view] = views;
  // 200: an existing task answers, a dedup hit, the task a debounced enqueue joined, or the key's task it skipped for.
  return c.json(view, view?.deduplicated || view?.debounced || view?.skipped ? 200 : 201);
});

tasks.post('/batch', requireScope('tasks:write'), async (c) => {
  const raw = await readJson(c.req.raw, LIMITS.batchRequestBytes);
  const parsed = batchSchema.safeParse(raw);
  if (!parsed.success) throw new ValidationError(fieldIssues(parsed.error));
  const inherited = trace(c);
  const tasks = await enqueue(
    c,
    await validateTasks(
      c,
      parsed.data.tasks.map((item) => inheritTrace(item, inherited)),
      'tasks',
    ),
  );
  return c.json({ tasks } satisfies Answer<typeof enqueuedBatch>, 201);
});

/**
 * Writes the tasks, wakes the dispatcher, and answers each task whole or, when the request
 * says `Prefer: return=minimal`, as its id, queue and status only (read back as no more).
 */
async function enqueue(c: Context<AppEnv>, newTasks: readonly NewTask[]): Promise<Answer<typeof enqueued>[]> {
  if (prefersMinimal(c.req.header('prefer'))) {
    const refs = await taskInsertManyRefs(c.var.db, newTasks);
    pokeForNew(c.var.poke, refs);
    pokeForEnded(c, refs);
    c.header('Preference-Applied', 'return=minimal');
    return refs.map((r) => ({ ...taskStateView(r.task), ...joined(r) }));
  }
  const results = await taskInsertMany(c.var.db, newTasks);
  pokeForNew(c.var.poke, results);
  pokeForEnded(c, results);
  return results.map((r) => enqueuedView(r, c.var.canRead));
}

tasks.get('/', requireScope('tasks:read'), async (c) => {
  const { tasks, nextCursor } = await listTasks(c.var.db, c.req.query(), c.var.queueScope);
  return c.json({ tasks: tasks.map((t) => taskView(t)), next_cursor: nextCursor } satisfies Answer<typeof taskList>);
});

tasks.get('/:id', requireScope('tasks:read'), async (c) => {
  const { task, attempts } = await getTask(c.var.db, c.req.param('id'));
  return c.json(taskDetailView(visibleTask(c.var.queueScope, task, c.req.param('id')), attempts));
});

/** The tasks it enqueued as their parent (`parent_id`), oldest first, up to 1,000: what a resumed parent reads. */
tasks.get('/:id/children', requireScope('tasks:read'), async (c) => {
  const { task } = await getTask(c.var.db, c.req.param('id'));
  visibleTask(c.var.queueScope, task, c.req.param('id'));
  // A child may be of another queue: a key limited to queues sees only its own.
  const children = await taskChildren(c.var.db, task.id, CHILDREN_SHOWN, c.var.queueScope);
  return c.json({ children: children.map((t) => taskView(t)) } satisfies Answer<typeof childList>);
});

const CHILDREN_SHOWN = 1_000;

tasks.post('/:id/cancel', requireScope('tasks:write'), async (c) => {
  await requireTaskInScope(c.var.db, c.var.queueScope, c.req.param('id'));
  const task = await cancelTask(c.var, c.req.param('id'));
  return c.json(c.var.canRead ? taskView(task) : taskStateView(task));
});

/** The enqueue request's trace context, which its tasks that name none of their own take. */
const trace = (c: Context<AppEnv>) => requestTrace(c.req.header('traceparent'), c.req.header('tracestate'));

/**
 * Validates every item first, so a batch with one bad task writes nothing: first that the key
 * may use each item's queue (api/queue-access.ts), then the items; then that each task without a
 * url is bound for a pull queue (which only the database's overrides may say).
 */
async function validateTasks(c: Context<AppEnv>, items: readonly unknown[], prefix: string): Promise<NewTask[]> {
  const issues: FieldIssue[] = [];
  const checked: Array<{ task: NewTask; group?: string }> = [];
  const at = (i: number) => (prefix === '' ? '' : `${prefix}.${i}`);
  requireEnqueueQueues(c.var.queueScope, items, (i) => (prefix === '' ? 'queue' : `${at(i)}.queue`));
  items.forEach((item, i) => {
    const one = checkTask(item, c.var.config, at(i));
    if ('issues' in one) issues.push(...one.issues);
    else checked.push(one);
  });
  if (issues.length > 0) throw new ValidationError(issues);
  // Groups become one task per URL in their items' places (api/groups.ts).
  const out = await expandGroups(c.var.db, checked, (i) => (prefix === '' ? 'group' : `${at(i)}.group`), prefix || 'group');
  await requireParentsInScope(c.var.db, c.var.queueScope, out);
  // The items as sent, so that a path names one; a group's tasks have its URLs.
  const sent = checked.map((x) => (x.group === undefined ? x.task : { queue: x.task.queue, url: x.group }));
  await requireUrlOrPull(c.var.db, c.var.config, sent, (i) => (prefix === '' ? 'url' : `${at(i)}.url`));
  return out;
}

tasks.post('/:id/retry', requireScope('tasks:write'), async (c) => {
  await requireTaskInScope(c.var.db, c.var.queueScope, c.req.param('id'));
  const task = await redriveTask(c.var, c.req.param('id'));
  return c.json(c.var.canRead ? taskView(task) : taskStateView(task));
});

/** Tells the dispatcher when the tasks just written come due (a deduplicated hit adds nothing). */
function pokeForNew(poke: (p: Poke) => void, results: readonly Enqueued<TaskRef>[]): void {
  const p = pokeForTasks(
    results.filter((r) => !r.deduplicated && !r.skipped).map((r) => r.task),
    Date.now(),
  );
  if (p) poke(p);
}

/** Leases a key strategy ended free their slots now: a poke as for a lease's end, per queue. */
function pokeForEnded(c: Context<AppEnv>, results: readonly Enqueued<unknown>[]): void {
  const queues = new Set(results.flatMap((r) => (r.endedLeases ?? []).map((l) => l.queue)));
  for (const queue of queues) c.var.poke(pokeLeaseEnded(Date.now(), queue, c.var.config.clusterCap));
}

/** A new task is the caller's own; a dedup hit may be another caller's, shown whole only to readers. */
function enqueuedView(e: Enqueued, canRead: boolean): Answer<typeof enqueued> {
  const another = e.deduplicated || e.debounced === true || e.skipped === true;
  return { ...(another && !canRead ? taskStateView(e.task) : taskView(e.task)), ...joined(e) };
}

/** Whether the answer is another task than a new one: a dedup hit, or (debounced) the task it joined. */
function joined(e: Enqueued<unknown>) {
  return {
    deduplicated: e.deduplicated,
    ...(e.debounced === undefined ? {} : { debounced: e.debounced }),
    ...(e.skipped === undefined ? {} : { skipped: e.skipped }),
  };
}
