/**
 * POST /v1/tasks/redrive: replay the dead tasks that match a filter (queue, URL prefix, when they
 * died), or count them (`dry_run`). Built on the dashboard's "redrive all" (task-ops.ts
 * `redriveMatching`): batches of one statement each, at most 10,000 tasks a call, `more` and
 * `last_id` to go on.
 */
import { Hono } from 'hono';
import { ValidationError } from '../../core/errors.ts';
import { fieldIssues } from '../../core/issues.ts';
import { LIMITS } from '../../core/types.ts';
import { type DeadFilter, taskCountDead } from '../../db/tasks.ts';
import type { Answer, redriven } from '../answers.ts';
import { requireScope } from '../auth.ts';
import { readJson } from '../body.ts';
import type { AppEnv } from '../context.ts';
import { requireQueue } from '../queue-access.ts';
import { redriveSchema } from '../schemas/calls.ts';
import { REDRIVE_BATCH, REDRIVE_BATCHES_PER_CALL, redriveMatching } from '../task-ops.ts';

export const redrive = new Hono<AppEnv>();

redrive.post('/', requireScope('tasks:write'), async (c) => {
  const parsed = redriveSchema.safeParse(await readJson(c.req.raw, LIMITS.requestBytes, { empty: {} }));
  if (!parsed.success) throw new ValidationError(fieldIssues(parsed.error));
  const r = parsed.data;
  if (r.queue !== undefined) requireQueue(c.var.queueScope, r.queue);
  const filter: DeadFilter = {
    queue: r.queue,
    urlPrefix: r.url_prefix,
    since: r.since === undefined ? undefined : new Date(r.since),
    until: r.until === undefined ? undefined : new Date(r.until),
    queues: c.var.queueScope,
  };
  if (r.dry_run) {
    const cap = REDRIVE_BATCH * REDRIVE_BATCHES_PER_CALL;
    const matched = await taskCountDead(c.var.db, filter, cap);
    return c.json({ matched, redriven: 0, skipped: 0, more: matched === cap, last_id: null, dry_run: true } satisfies Answer<
      typeof redriven
    >);
  }
  const report = await redriveMatching(c.var, filter, r.after ?? null);
  return c.json({
    matched: report.redriven + report.skipped,
    redriven: report.redriven,
    skipped: report.skipped,
    more: report.more,
    last_id: report.lastId,
    dry_run: false,
  } satisfies Answer<typeof redriven>);
});
