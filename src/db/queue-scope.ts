/**
 * What a key limited to queues may reach (docs/DESIGN.md §8): the condition its listings add,
 * and the queues of tasks it names by id, read before anything is done to them. A task's queue
 * never changes, so a queue read first still holds when the task is then changed.
 */
import type { Queryable } from './db.ts';
import { UNFINISHED_SQL } from './rows.ts';

/**
 * SQL true when the queue in `column` is one the patterns in the `text[]` parameter `param`
 * admit (as `queueAllowed` does: a name, or a prefix ending in `*`), or when that parameter is
 * null. Queue names hold no `*`, so a pattern's last `*` can only be the prefix's mark.
 */
export function inQueueScope(column: string, param: string): string {
  return `(${param}::text[] is null or exists (
    select 1 from unnest(${param}::text[]) p
    where ${column} = p or (right(p, 1) = '*' and starts_with(${column}, left(p, -1)))))`;
}

/** The queue of a task, finished or not; `null` when there is no such task. */
export async function taskQueue(db: Queryable, id: string): Promise<string | null> {
  const [row] = await db.query<{ queue: string }>('select queue from sluice.all_tasks where id = $1', [id]);
  return row?.queue ?? null;
}

/** The queues of those of `ids` that are unfinished tasks (what a `parent_id` may name), by id. */
export async function unfinishedTaskQueues(db: Queryable, ids: readonly string[]): Promise<Map<string, string>> {
  const rows = await db.query<{ id: string; queue: string }>(
    `select id::text as id, queue from sluice.tasks where id = any($1::bigint[]) and status in ${UNFINISHED_SQL}`,
    [ids],
  );
  return new Map(rows.map((r) => [r.id, r.queue]));
}
