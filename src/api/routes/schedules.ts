/**
 * /v1/schedules (docs/guide.md "Schedules"): a cron expression in a time zone that enqueues a task at
 * each slot. Creating, pausing, resuming and deleting take `tasks:write`, as enqueueing does: a
 * schedule only enqueues what its key could enqueue itself, through the same checks. Reading
 * takes `tasks:read`. A key limited to queues reaches only the schedules whose task is for one
 * of them (api/queue-access.ts): others answer 404, as missing ones do.
 */

import type { Cron } from 'croner';
import { Hono } from 'hono';
import type { Config } from '../../config.ts';
import { type FieldIssue, NotFoundError, ValidationError } from '../../core/errors.ts';
import { fieldIssues } from '../../core/issues.ts';
import { checkZone, nextSlot, parseCron, queueKey } from '../../core/schedule.ts';
import { LIMITS } from '../../core/types.ts';
import {
  databaseNow,
  type NewSchedule,
  type Schedule,
  scheduleDelete,
  scheduleGet,
  scheduleInsert,
  scheduleList,
  schedulePause,
  scheduleResume,
  toTemplate,
} from '../../db/schedules.ts';
import { queueAllowed } from '../../security/api-keys.ts';
import type { Answer, ScheduleAnswer, scheduleList as scheduleListAnswer, scheduleState } from '../answers.ts';
import { requireScope } from '../auth.ts';
import { readJson } from '../body.ts';
import type { AppEnv } from '../context.ts';
import { requireUrlOrPull } from '../pull.ts';
import { requireEnqueueQueues, requireScheduleInScope } from '../queue-access.ts';
import { scheduleListQuerySchema, scheduleName, scheduleSchema } from '../schemas/calls.ts';
import { checkTask } from '../schemas/resolve.ts';
import { bodyView } from '../task-answers.ts';

export const schedules = new Hono<AppEnv>();

/** Enqueue fields a firing has no use for: it runs at its slot, and each slot fires once. */
const REFUSED: Record<string, string> = {
  delay_ms: 'a firing runs at its slot; a schedule takes no delay',
  run_at: 'a firing runs at its slot; a schedule takes no run_at',
  expires_at: 'a firing has no fixed deadline; give ttl_ms, which counts from each slot',
  dedup_key: 'each slot fires once already; use `overlap` to decide what a firing does while the previous one is unfinished',
  dedup_ttl_ms: 'each slot fires once already; use `overlap` to decide what a firing does while the previous one is unfinished',
  group: 'a firing enqueues one task: give its `url` (a group becomes one task per URL when a call enqueues it)',
  debounce: 'each slot fires once already; use `overlap` to decide what a firing does while the previous one is unfinished',
  parent_id: 'a firing has no parent: a parent task enqueues its children during its own run, and waits on them there',
  traceparent: 'each firing would join one trace forever; a firing starts no trace (its handler may start one)',
  tracestate: 'goes with `traceparent`, which a schedule takes none of',
};

/** Key fields that overlap `queue` sets itself. */
const QUEUE_KEYED = ['concurrency_key', 'concurrency_limit'];

schedules.post('/', requireScope('tasks:write'), async (c) => {
  const raw = await readJson(c.req.raw, LIMITS.requestBytes);
  // Its task's queue first: no answer to a limited key may depend on another queue's settings.
  requireEnqueueQueues(c.var.queueScope, [(raw as { task?: unknown } | null)?.task], () => 'task.queue');
  const { schedule, cron, paused } = validateSchedule(raw, c.var.config);
  await requireUrlOrPull(c.var.db, c.var.config, [schedule.template], () => 'task.url');
  const nextFireAt = paused ? null : nextSlot(cron, await databaseNow(c.var.db));
  const created = await scheduleInsert(c.var.db, { ...schedule, nextFireAt });
  if (created.nextFireAt) c.var.poke({ atMs: created.nextFireAt.getTime(), tasks: 1 });
  return c.json(scheduleView(created), 201);
});

schedules.get('/', requireScope('tasks:read'), async (c) => {
  const parsed = scheduleListQuerySchema.safeParse(c.req.query());
  if (!parsed.success) throw new ValidationError(fieldIssues(parsed.error));
  const { cursor, limit } = parsed.data;
  const rows = await scheduleList(c.var.db, { afterName: cursor, limit, queues: c.var.queueScope });
  const last = rows.at(-1);
  const next_cursor = rows.length === limit && last ? last.name : null;
  return c.json({ schedules: rows.map(scheduleView), next_cursor } satisfies Answer<typeof scheduleListAnswer>);
});

/** The `:name` of the path, refused (400) when no schedule could have it: nothing reaches the database. */
function nameParam(c: { req: { param(name: 'name'): string } }): string {
  const parsed = scheduleName.safeParse(c.req.param('name'));
  if (!parsed.success) throw new ValidationError([{ path: 'name', message: 'is not a valid schedule name' }]);
  return parsed.data;
}

schedules.get('/:name', requireScope('tasks:read'), async (c) => {
  const name = nameParam(c);
  const found = await scheduleGet(c.var.db, name);
  if (!found || !queueAllowed(c.var.queueScope, found.template.queue)) throw new NotFoundError(`schedule ${name}`);
  return c.json(scheduleView(found));
});

schedules.post('/:name/pause', requireScope('tasks:write'), async (c) => {
  const name = nameParam(c);
  await requireScheduleInScope(c.var.db, c.var.queueScope, name);
  const paused = await schedulePause(c.var.db, name);
  if (!paused) throw new NotFoundError(`schedule ${name}`);
  return c.json(c.var.canRead ? scheduleView(paused) : scheduleStateView(paused));
});

schedules.post('/:name/resume', requireScope('tasks:write'), async (c) => {
  const name = nameParam(c);
  const found = await scheduleGet(c.var.db, name);
  if (!found || !queueAllowed(c.var.queueScope, found.template.queue)) throw new NotFoundError(`schedule ${name}`);
  const parsed = parseCron(found.cron, found.timezone);
  const next = 'cron' in parsed ? nextSlot(parsed.cron, await databaseNow(c.var.db)) : null;
  const resumed = await scheduleResume(c.var.db, name, next);
  if (!resumed) throw new NotFoundError(`schedule ${name}`);
  if (resumed.nextFireAt) c.var.poke({ atMs: resumed.nextFireAt.getTime(), tasks: 1 });
  return c.json(c.var.canRead ? scheduleView(resumed) : scheduleStateView(resumed));
});

schedules.delete('/:name', requireScope('tasks:write'), async (c) => {
  const name = nameParam(c);
  await requireScheduleInScope(c.var.db, c.var.queueScope, name);
  if (!(await scheduleDelete(c.var.db, name))) throw new NotFoundError(`schedule ${name}`);
  return c.body(null, 204);
});

/**
 * Checks the whole request in one round: the schedule's fields, its cron and zone, and its task.
 * The first slot is left to the caller, which reads the database's clock for it.
 */
function validateSchedule(raw: unknown, config: Config): { schedule: Omit<NewSchedule, 'nextFireAt'>; cron: Cron; paused: boolean } {
  const issues: FieldIssue[] = [];
  const parsed = scheduleSchema.safeParse(raw);
  if (!parsed.success) issues.push(...fieldIssues(parsed.error));
  const input = (raw ?? {}) as Record<string, unknown>;
  const overlap = parsed.success ? parsed.data.overlap : input.overlap;

  const zoneText = typeof input.timezone === 'string' ? input.timezone : 'UTC';
  const zone = checkZone(zoneText);
  if ('problem' in zone) issues.push({ path: 'timezone', message: zone.problem });
  const cron = typeof input.cron === 'string' && input.cron !== '' ? parseCron(input.cron, 'zone' in zone ? zone.zone : 'UTC') : null;
  if (cron && 'problem' in cron) issues.push({ path: 'cron', message: cron.problem });

  const task = input.task;
  let template: NewSchedule['template'] | null = null;
  if (task !== null && typeof task === 'object' && !Array.isArray(task)) {
    const fields = task as Record<string, unknown>;
    for (const [field, why] of Object.entries(REFUSED)) if (field in fields) issues.push({ path: `task.${field}`, message: why });
    // Nor as headers of the task, whatever their case: each would reach every firing all the same.
    const headers = fields.headers !== null && typeof fields.headers === 'object' ? Object.keys(fields.headers) : [];
    for (const name of headers)
      if (name.toLowerCase() === 'traceparent' || name.toLowerCase() === 'tracestate')
        issues.push({ path: `task.headers.${name}`, message: REFUSED[name.toLowerCase()]! });
    // With overlap `queue` the firings hold a key of their own, limit 1, as if the task gave it.
    const keyed = overlap === 'queue' ? QUEUE_KEYED : [];
    for (const field of keyed)
      if (field in fields) issues.push({ path: `task.${field}`, message: 'overlap `queue` runs the firings on a key of their own' });
    const own = overlap === 'queue' ? { concurrency_key: queueKey(String(input.name)), concurrency_limit: 1 } : {};
    const given = Object.entries(fields).filter(([f]) => !(f in REFUSED) && !keyed.includes(f));
    const checked = checkTask({ ...Object.fromEntries(given), ...own }, config, 'task');
    if ('issues' in checked) issues.push(...checked.issues);
    else template = toTemplate(checked.task);
  }
  if (issues.length > 0 || !parsed.success || !template || !cron || !('cron' in cron) || !('zone' in zone)) {
    throw new ValidationError(issues);
  }
  const s = parsed.data;
  return {
    schedule: { name: s.name, cron: s.cron, timezone: zone.zone, overlap: s.overlap, template },
    cron: cron.cron,
    paused: s.paused,
  };
}

function scheduleView(s: Schedule): ScheduleAnswer {
  const t = s.template;
  return {
    name: s.name,
    cron: s.cron,
    timezone: s.timezone,
    overlap: s.overlap,
    paused: s.paused,
    next_fire_at: s.nextFireAt?.toISOString() ?? null,
    last_slot_at: s.lastSlotAt?.toISOString() ?? null,
    last_outcome: s.lastOutcome,
    last_task_id: s.lastTaskId,
    fired: s.fired,
    skipped: s.skipped,
    missed: s.missed,
    // As a task is shown: header values may be credentials, so only their names.
    task: {
      queue: t.queue,
      url: t.url,
      method: t.method,
      concurrency_key: t.concurrency_key,
      concurrency_limit: t.concurrency_limit,
      rate_limit: t.rate_limit === null || t.rate_period_ms === null ? null : { limit: t.rate_limit, period_ms: t.rate_period_ms },
      priority: t.priority,
      ttl_ms: t.ttl_ms,
      max_attempts: t.max_attempts,
      backoff: t.backoff,
      timeout_ms: t.timeout_ms,
      lease_ms: t.lease_ms,
      content_type: t.content_type,
      header_names: Object.keys(t.headers),
      ...bodyView({ body: t.body, contentType: t.content_type }),
    },
    created_at: s.createdAt.toISOString(),
    updated_at: s.updatedAt.toISOString(),
  };
}

/** What a key without `tasks:read` sees of a schedule it pauses or resumes. */
function scheduleStateView(s: Schedule): Answer<typeof scheduleState> {
  return { name: s.name, paused: s.paused, next_fire_at: s.nextFireAt?.toISOString() ?? null };
}
