/** Lease calls' reads and the heartbeat's compare-and-set (endings go through settle.ts). */
import type { AttemptOutcome, Task } from '../core/types.ts';
import type { Queryable } from './db.ts';
import { ATTEMPTS_OF_TASK } from './history.ts';
import { stillLeased, type TaskRow, toTask } from './rows.ts';

/**
 * The task a lease belongs to: holding it now, or ended by it. `null` when it names none. The
 * task id comes from the lease token, so the row is found by its key (lease ids have no index).
 */
export async function leaseFind(db: Queryable, taskId: string, leaseId: string): Promise<{ task: Task; current: boolean } | null> {
  const rows = await db.query<TaskRow>('select * from sluice.all_tasks where id = $1 and (lease_id = $2 or last_lease_id = $2)', [
    taskId,
    leaseId,
  ]);
  const row = rows[0];
  return row ? { task: toTask(row), current: row.lease_id === leaseId } : null;
}

/** Writes `note` as the task's `last_error` while `leaseId` still holds it (a push left unanswered). */
export async function leaseNote(db: Queryable, taskId: string, leaseId: string, note: string): Promise<void> {
  await db.query(
    `update sluice.tasks t set last_error = $3, updated_at = now() where t.id = $1 and t.lease_id = $2 and ${stillLeased('t')}`,
    [taskId, leaseId, note],
  );
}

export type HeartbeatResult = { ok: true; expiresAt: Date } | { ok: false };

/**
 * Extends a held, unexpired lease by `extendMs` from now (the database's clock), never past
 * `maxTotalMs` after the claim, and only while no cancellation was asked for.
 */
export async function leaseHeartbeat(
  db: Queryable,
  taskId: string,
  leaseId: string,
  extendMs: number,
  maxTotalMs: number,
): Promise<HeartbeatResult> {
  const rows = await db.query<{ lease_expires_at: Date }>(
    `update sluice.tasks t
     set lease_expires_at = least(now() + make_interval(secs => $2 / 1000.0), t.leased_at + make_interval(secs => $3 / 1000.0)),
         updated_at = now()
     where t.id = $4 and t.lease_id = $1 and ${stillLeased('t')} and t.lease_expires_at > now() and t.cancel_requested_at is null
       and t.leased_at + make_interval(secs => $3 / 1000.0) > now()
     returning lease_expires_at`,
    [leaseId, extendMs, maxTotalMs, taskId],
  );
  return rows[0] ? { ok: true, expiresAt: rows[0].lease_expires_at } : { ok: false };
}

export interface AttemptRecord {
  attempt: number;
  leaseId: string;
  startedAt: Date;
  endedAt: Date;
  outcome: AttemptOutcome;
  httpStatus: number | null;
  durationMs: number | null;
  error: string | null;
}

/** Every ended attempt of a task, oldest first. */
export async function taskAttempts(db: Queryable, taskId: string): Promise<AttemptRecord[]> {
  const rows = await db.query<{
    attempt: number;
    lease_id: string;
    started_at: Date;
    ended_at: Date;
    outcome: AttemptOutcome;
    http_status: number | null;
    duration_ms: number | null;
    error: string | null;
  }>(ATTEMPTS_OF_TASK, [taskId]);
  return rows.map((r) => ({
    attempt: r.attempt,
    leaseId: r.lease_id,
    startedAt: r.started_at,
    endedAt: r.ended_at,
    outcome: r.outcome,
    httpStatus: r.http_status,
    durationMs: r.duration_ms,
    error: r.error,
  }));
}
