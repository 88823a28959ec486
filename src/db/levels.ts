/**
 * What a push that went unanswered teaches its level (0016_levels.sql), on an adaptive queue
 * only (an override wins over the environment's list, as in the settle), and its origin
 * (0027_endpoints.sql: a failure). Its lease stays held until it expires or its holder ends it,
 * so no settle carries its signal: this call does.
 */
import type { Queryable } from './db.ts';

export interface UnansweredPush {
  taskId: string;
  queue: string;
  concurrencyKey: string | null;
  leasedAt: Date;
  /** `timeout` or `connection lost`. */
  cause: string;
  /** The task's URL, whose origin failed (none: no origin learns). */
  url?: string | null;
}

/** The level a push teaches: its key's lane (`k:<key>`, as sluice.tasks' `lane`), else its queue's own (`*`). */
export function levelOf(concurrencyKey: string | null): string {
  return concurrencyKey === null ? '*' : `k:${concurrencyKey}`;
}

/** `pauseAfter`: failures in a row that pause an origin (0: never). */
export async function levelsLearnUnanswered(
  db: Queryable,
  push: UnansweredPush,
  adaptiveQueues: readonly string[],
  pauseAfter = 0,
): Promise<void> {
  await db.query(
    `select (select sluice.levels_learn(
               jsonb_build_array(jsonb_build_object('queue', $1::text, 'level', $2::text, 'signal', 'overload', 'adaptive', true,
                                                    'leased_at', $3::timestamptz, 'cause', $4::text)),
               array[$5::bigint])
             where a.adaptive),
            (select sluice.endpoints_learn(
               jsonb_build_array(jsonb_build_object('n', 0, 'id', $5::bigint, 'origin', sluice.url_origin($7::text), 'health', 'fail',
                                                    'error', 'push ' || $4::text)),
               $8::integer)
             where $7::text is not null)
     from (select coalesce((select (options ->> 'adaptive')::boolean from sluice.queues where name = $1), $1 = any($6::text[])) as adaptive) a`,
    [
      push.queue,
      levelOf(push.concurrencyKey),
      push.leasedAt.toISOString(),
      push.cause,
      push.taskId,
      adaptiveQueues,
      push.url ?? null,
      pauseAfter,
    ],
  );
}
