/**
 * Endpoint groups (docs/guide.md "Endpoint groups", migrations/0025_groups.sql): a group's URLs
 * checked as a task's url is when it is put, its answer, and what an enqueue naming it becomes,
 * one task per URL in the item's place. Shared by the routes and the dashboard.
 */
import { type FieldIssue, ValidationError } from '../core/errors.ts';
import { LIMITS } from '../core/types.ts';
import type { Queryable } from '../db/db.ts';
import { type Group, groupsNamed } from '../db/groups.ts';
import type { NewTask } from '../db/new-task.ts';
import { checkTarget } from '../security/targets.ts';
import type { Answer, group as groupAnswer } from './answers.ts';

export function groupView(g: Group): Answer<typeof groupAnswer> {
  return { name: g.name, urls: g.urls, created_at: g.createdAt.toISOString(), updated_at: g.updatedAt.toISOString() };
}

/**
 * A group's URLs as they will be pushed to: each passed the target check (security/targets.ts)
 * and written as it writes it; one written twice is refused, naming both. Issues at `urls.N`.
 */
export function groupUrls(urls: readonly string[], allowPrivate: boolean): string[] {
  const issues: FieldIssue[] = [];
  const seen = new Map<string, number>();
  const out = urls.map((raw, i) => {
    const target = checkTarget(raw, allowPrivate);
    if (!target.ok) {
      issues.push({ path: `urls.${i}`, message: target.reason });
      return raw;
    }
    const href = target.url.href;
    const first = seen.get(href);
    if (first !== undefined) issues.push({ path: `urls.${i}`, message: `is urls.${first} again (${href})` });
    else seen.set(href, i);
    return href;
  });
  if (issues.length > 0) throw new ValidationError(issues);
  return out;
}

/**
 * The tasks of an enqueue, each item that names a group made one task per URL of the group, in
 * its place (the same task, that url); all other items as they are. A group that does not exist
 * is an issue at `pathOf(i)`; more tasks than a batch may hold, one at `whole`.
 */
export async function expandGroups(
  db: Queryable,
  items: readonly { task: NewTask; group?: string }[],
  pathOf: (i: number) => string,
  whole: string,
): Promise<NewTask[]> {
  const names = [...new Set(items.flatMap((x) => (x.group === undefined ? [] : [x.group])))];
  if (names.length === 0) return items.map((x) => x.task);
  const groups = await groupsNamed(db, names);
  const issues: FieldIssue[] = [];
  const out: NewTask[] = [];
  for (const [i, x] of items.entries()) {
    if (x.group === undefined) {
      out.push(x.task);
      continue;
    }
    const group = groups.get(x.group);
    if (group) for (const url of group.urls) out.push({ ...x.task, url });
    else issues.push({ path: pathOf(i), message: `names no group (PUT /v1/groups/${x.group} makes one)` });
  }
  if (issues.length === 0 && out.length > LIMITS.batchSize) {
    issues.push({ path: whole, message: `makes ${out.length} tasks (a group makes one per URL): at most ${LIMITS.batchSize} a request` });
  }
  if (issues.length > 0) throw new ValidationError(issues);
  return out;
}
