/** Waits on child tasks: the decision is `sluice.lease_wait` (migrations/functions/waits.sql). */
import type { Task } from '../core/types.ts';
import type { Queryable } from './db.ts';
import { inQueueScope } from './queue-scope.ts';
import { type TaskRow, toTask } from './rows.ts';

export type WaitResult =
  | { kind: 'waiting'; waitingOn: string[]; lentQueue: boolean; lentKey: boolean }
  | { kind: 'lease_lost' }
  | { kind: 'cancelled' }
  | { kind: 'not_children'; ids: string[] }
  | {
      kind: 'deadlock';
      level: 'queue' | 'key';
      queue: string;
      key: string | null;
      limit: number;
      chain: Array<{ id: string; queue: string; key: string | null }>;
    };

/**
 * The holder of a lease waits for children of its task (`null`: all of them): its lease ends
 * and it is pushed again once they have all finished. `queuesJson`: the environment's queue
 * settings, as the claim takes them.
 */
export async function leaseWait(
  db: Queryable,
  taskId: string,
  leaseId: string,
  children: readonly string[] | null,
  queuesJson: string,
): Promise<WaitResult> {
  const [row] = await db.query<{ r: Record<string, unknown> }>('select sluice.lease_wait($1, $2, $3::bigint[], $4::jsonb) as r', [
    taskId,
    leaseId,
    children,
    queuesJson,
  ]);
  const r = row!.r;
  switch (r.error) {
    case undefined:
      return {
        kind: 'waiting',
        waitingOn: (r.waiting_on as number[]).map(String),
        lentQueue: r.lent_queue === true,
        lentKey: r.lent_key === true,
      };
    case 'lease_lost':
      return { kind: 'lease_lost' };
    case 'cancelled':
      return { kind: 'cancelled' };
    case 'not_children':
      return { kind: 'not_children', ids: (r.ids as number[]).map(String) };
    default:
      return {
        kind: 'deadlock',
        level: r.level as 'queue' | 'key',
        queue: r.queue as string,
        key: (r.key as string | null) ?? null,
        limit: r.limit as number,
        chain: r.chain as Array<{ id: string; queue: string; key: string | null }>,
      };
  }
}

/**
 * A task's children (tasks enqueued with its id as `parent_id`), oldest first, at most `limit`;
 * with `queues`, only those of the queues its patterns admit (db/queue-scope.ts).
 */
export async function taskChildren(
  db: Queryable,
  parentId: string,
  limit: number,
  queues: readonly string[] | null = null,
): Promise<Task[]> {
  const rows = await db.query<TaskRow>(
    `select * from sluice.all_tasks where parent_id = $1 and ${inQueueScope('queue', '$3')} order by id limit $2`,
    [parentId, limit, queues],
  );
  return rows.map(toTask);
}
