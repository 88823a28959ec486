/**
 * POST /v1/tasks/redrive: replay the dead tasks that match a filter (queue, URL prefix, when they
 * died), or count them (`dry_run`). Built on the dashboard's "redrive all" (task-ops.ts
 * `redriveMatching`): batches of one statement each, at most 10,000 tasks a call, `more` and
 * `last_id` to go on.
 */
import { Hono } from 'hono';
import { LIMITS } from '../../core/types.ts';
import { taskCountDead } from '../../db/tasks.ts';
import type { Answer, redriven } from '../answers.ts';
import { requireScope } from '../auth.ts';
import { readJson } from '../body.ts';
import type { AppEnv } from '../context.ts';
import { REDRIVE_CAP, redriveMatching, redriveSelection } from '../task-ops.ts';

export const redrive = new Hono<AppEnv>();

redrive.post('/', requireScope('tasks:write'), async (c) => {
  const { filter, dryRun, after } = redriveSelection(await readJson(c.req.raw, LIMITS.requestBytes, { empty: {} }), c.var.queueScope);
  if (dryRun) {
    const matched = await taskCountDead(c.var.db, filter, REDRIVE_CAP);
    return c.json({ matched, redriven: 0, skipped: 0, more: matched === REDRIVE_CAP, last_id: null, dry_run: true } satisfies Answer<
      typeof redriven
    >);
  }
  const report = await redriveMatching(c.var, filter, after);
  return c.json({
    matched: report.redriven + report.skipped,
    redriven: report.redriven,
    skipped: report.skipped,
    more: report.more,
    last_id: report.lastId,
    dry_run: false,
  } satisfies Answer<typeof redriven>);
});
