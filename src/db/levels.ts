/**
 * What a push that went unanswered teaches its level (0016_levels.sql). Its lease stays held
 * until it expires or its holder ends it, so no settle carries its signal: this call does, on an
 * adaptive queue only (an override wins over the environment's list, as in the settle).
 */
import type { Queryable } from './db.ts';

export interface UnansweredPush {
  taskId: string;
  queue: string;
  concurrencyKey: string | null;
  leasedAt: Date;
  /** `timeout` or `connection lost`. */
  cause: string;
}

/** The level a push teaches: its key's lane (`k:<key>`, as sluice.tasks' `lane`), else its queue's own (`*`). */
export function levelOf(concurrencyKey: string | null): string {
  return concurrencyKey === null ? '*' : `k:${concurrencyKey}`;
}

export async function levelsLearnUnanswered(db: Queryable, push: UnansweredPush, adaptiveQueues: readonly string[]): Promise<void> {
  await db.query(
    `select sluice.levels_learn(
       jsonb_build_array(jsonb_build_object('queue', $1::text, 'level', $2::text, 'signal', 'overload', 'adaptive', true,
                                            'leased_at', $3::timestamptz, 'cause', $4::text)),
       array[$5::bigint])
     from (select coalesce((select (options ->> 'adaptive')::boolean from sluice.queues where name = $1), $1 = any($6::text[])) as adaptive) a
     where a.adaptive`,
    [push.queue, levelOf(push.concurrencyKey), push.leasedAt.toISOString(), push.cause, push.taskId, adaptiveQueues],
  );
}
