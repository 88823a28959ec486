/**
 * /v1/groups (admin): endpoint groups, a name for URLs that an enqueue naming the group fans
 * out to (api/groups.ts). A group is no queue's, so a key limited to queues may not use these.
 */
import { type Context, Hono } from 'hono';
import { NotFoundError, ValidationError } from '../../core/errors.ts';
import { fieldIssues } from '../../core/issues.ts';
import { LIMITS } from '../../core/types.ts';
import { groupDelete, groupGet, groupList, groupPut } from '../../db/groups.ts';
import type { Answer, groupList as groupListAnswer } from '../answers.ts';
import { requireScope } from '../auth.ts';
import { readJson } from '../body.ts';
import type { AppEnv } from '../context.ts';
import { groupUrls, groupView } from '../groups.ts';
import { requireEveryQueue } from '../queue-access.ts';
import { groupListQuerySchema, groupName, groupSchema } from '../schemas/calls.ts';

export const groups = new Hono<AppEnv>();

groups.use('*', requireScope('admin'), async (c, next) => {
  // A group is no queue's: its URLs receive the tasks of any queue that names it.
  requireEveryQueue(c.var.queueScope, 'an endpoint group');
  await next();
});

/** The `:name` of the path, refused (400) when no group could have it: nothing reaches the database. */
function nameParam(c: Context<AppEnv>): string {
  const parsed = groupName.safeParse(c.req.param('name'));
  if (!parsed.success) throw new ValidationError([{ path: 'name', message: 'is not a valid group name (the rules of queue names)' }]);
  return parsed.data;
}

groups.get('/', async (c) => {
  const parsed = groupListQuerySchema.safeParse(c.req.query());
  if (!parsed.success) throw new ValidationError(fieldIssues(parsed.error));
  const { cursor, limit } = parsed.data;
  const rows = await groupList(c.var.db, { afterName: cursor, limit });
  const last = rows.at(-1);
  const next_cursor = rows.length === limit && last ? last.name : null;
  return c.json({ groups: rows.map(groupView), next_cursor } satisfies Answer<typeof groupListAnswer>);
});

/** Creates the group (201) or replaces its URLs (200); each URL is checked as a task's url is. */
groups.put('/:name', async (c) => {
  const name = nameParam(c);
  const parsed = groupSchema.safeParse(await readJson(c.req.raw, LIMITS.requestBytes));
  if (!parsed.success) throw new ValidationError(fieldIssues(parsed.error));
  const urls = groupUrls(parsed.data.urls, c.var.config.allowPrivateTargets);
  const { group, created } = await groupPut(c.var.db, name, urls);
  return c.json(groupView(group), created ? 201 : 200);
});

groups.get('/:name', async (c) => {
  const name = nameParam(c);
  const found = await groupGet(c.var.db, name);
  if (!found) throw new NotFoundError(`group ${name}`);
  return c.json(groupView(found));
});

/** Deletes the group; tasks it made are left alone. */
groups.delete('/:name', async (c) => {
  const name = nameParam(c);
  if (!(await groupDelete(c.var.db, name))) throw new NotFoundError(`group ${name}`);
  return c.body(null, 204);
});
