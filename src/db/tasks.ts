/** Task rows: read, list, cancel, redrive (the enqueue: enqueue.ts). */
import { ConflictError, NotFoundError } from '../core/errors.ts';
import type { Task, TaskStatus } from '../core/types.ts';
import type { Queryable } from './db.ts';
import { archiveCtes, endedUnleased, LOCK_ORDER_CTE } from './history.ts';
import { inQueueScope } from './queue-scope.ts';
import { type TaskRow, toTask, UNFINISHED_SQL } from './rows.ts';

export async function taskGet(db: Queryable, id: string): Promise<Task | null> {
  const rows = await db.query<TaskRow>('select * from sluice.all_tasks where id = $1', [id]);
  return rows[0] ? toTask(rows[0]) : null;
}

export interface TaskFilter {
  queue?: string | undefined;
  status?: TaskStatus | undefined;
  concurrencyKey?: string | undefined;
  /** Only tasks with a smaller id (the previous page's last). */
  beforeId?: string | undefined;
  /** Only tasks of the queues these patterns admit (a key's `queues`, db/queue-scope.ts); null or absent: every queue. */
  queues?: readonly string[] | null | undefined;
  limit: number;
}

/**
 * Newest first. The status is stated twice: `=` for history's index by status, and `is not
 * distinct from` (the same here: it is never null) for the live tasks' indexes by queue, which
 * only a listing proves (migrations/0022_one_index_per_lookup.sql).
 */
export async function taskList(db: Queryable, f: TaskFilter): Promise<Task[]> {
  const rows = await db.query<TaskRow>(
    `select * from sluice.all_tasks
     where ($1::text is null or queue = $1)
       and ($2::text is null or (status = $2 and status is not distinct from $2))
       and ($3::text is null or concurrency_key = $3)
       and ($4::bigint is null or id < $4)
       and ${inQueueScope('queue', '$6')}
     order by id desc
     limit $5`,
    [f.queue ?? null, f.status ?? null, f.concurrencyKey ?? null, f.beforeId ?? null, f.limit, f.queues ?? null],
  );
  return rows.map(toTask);
}

/** Which dead tasks a bulk redrive takes. */
export interface DeadFilter {
  queue?: string | undefined;
  concurrencyKey?: string | undefined;
  /** Only tasks whose URL starts with this (an origin, a path under it). */
  urlPrefix?: string | undefined;
  /** Only tasks that went dead at or after `since`, and before `until`. */
  since?: Date | undefined;
  until?: Date | undefined;
  /** Only tasks of the queues these patterns admit (a key's `queues`, db/queue-scope.ts); null or absent: every queue. */
  queues?: readonly string[] | null | undefined;
}

/** The filter's conditions on a row of sluice.finished, its values from $n on (`deadParams`). */
function deadMatches(n: number): string {
  return `status = 'dead' and ($${n}::text is null or queue = $${n}) and ($${n + 1}::text is null or concurrency_key = $${n + 1})
    and ($${n + 2}::text is null or starts_with(url, $${n + 2}))
    and ($${n + 3}::timestamptz is null or finished_at >= $${n + 3}) and ($${n + 4}::timestamptz is null or finished_at < $${n + 4})
    and ${inQueueScope('queue', `$${n + 5}`)}`;
}

function deadParams(f: DeadFilter): unknown[] {
  return [f.queue ?? null, f.concurrencyKey ?? null, f.urlPrefix ?? null, f.since ?? null, f.until ?? null, f.queues ?? null];
}

/**
 * One batch of a bulk redrive: the first `limit` dead tasks matching `filter` with ids above
 * `afterId`, oldest first (through the status indexes), redriven in one statement. A task whose
 * dedup key another unfinished task of its queue holds stays dead (of several dead ones sharing
 * a key, the newest is redriven). Returns how many were examined and redriven, and the last id
 * examined, where the next batch starts.
 */
export async function taskRedriveMatching(
  db: Queryable,
  filter: DeadFilter,
  afterId: string | null,
  limit: number,
): Promise<{ examined: number; redriven: number; lastId: string | null }> {
  try {
    const rows = await db.query<{ examined: number; redriven: number; last_id: string | null }>(
      `with ${LOCK_ORDER_CTE}
       examined as (
         select id, queue, dedup_key from sluice.finished
         where ${deadMatches(3)} and ($1::bigint is null or id > $1)
         order by id
         limit $2
       ),
       eligible as (
         select e.id from examined e
         where e.dedup_key is null
            or (e.id = (select max(d.id) from examined d where d.queue = e.queue and d.dedup_key = e.dedup_key)
                and not exists (select 1 from sluice.tasks u
                                where u.queue = e.queue and u.dedup_key = e.dedup_key and u.status in ${UNFINISHED_SQL}))
       ),${redriveCtes('eligible')}
       select (select count(*) from examined)::int as examined, (select count(*) from redriven)::int as redriven,
              (select max(id) from examined)::text as last_id`,
      [afterId, limit, ...deadParams(filter)],
    );
    const row = rows[0]!;
    return { examined: row.examined, redriven: row.redriven, lastId: row.last_id };
  } catch (error) {
    if ((error as { code?: string }).code === '23505') {
      throw new ConflictError(409, 'duplicate_unfinished', 'a task with the dedup_key of a dead task was enqueued meanwhile: try again');
    }
    throw error;
  }
}

/** How many dead tasks match `filter`, counting no further than `cap` (through the status indexes). */
export async function taskCountDead(db: Queryable, filter: DeadFilter, cap: number): Promise<number> {
  const rows = await db.query<{ n: number }>(
    `select count(*)::int as n from (
       select 1 from sluice.finished
       where ${deadMatches(2)}
       limit $1
     ) matching`,
    [cap, ...deadParams(filter)],
  );
  return rows[0]?.n ?? 0;
}

/**
 * Cancels a task: a pending one at once; a leased one by request (its lease holder learns
 * of it at its next heartbeat, and a failure then ends it as cancelled instead of retrying).
 */
export async function taskCancel(db: Queryable, id: string): Promise<Task> {
  // With it, every unfinished task below it (children it enqueued, theirs, and so on): a
  // child of a cancelled parent has nobody left to resume.
  const rows = await db.query<{ id: string }>(
    `with recursive doomed as (
       select id from sluice.tasks where id = $1 and status in ${UNFINISHED_SQL}
       union
       select c.id from sluice.tasks c join doomed d on c.parent_id = d.id
       where c.status in ${UNFINISHED_SQL}
     ),
     -- Locked, and read as they are now: a row that finished meanwhile (a settle committed while
     -- this waited for its lock) is gone, and one claimed meanwhile is asked to stop.
     locked as (
       select t.id, t.status from sluice.tasks t join doomed d on d.id = t.id
       where t.status in ${UNFINISHED_SQL}
       for update of t
     ),
     requested as (
       update sluice.tasks t set cancel_requested_at = coalesce(t.cancel_requested_at, now()), updated_at = now()
       from locked l where t.id = l.id and l.status = 'leased'
       returning t.id
     ),
     done as (
       delete from sluice.tasks t using locked l
       where t.id = l.id and l.status <> 'leased'
       returning ${endedUnleased("'cancelled'")}
     ),${archiveCtes('done')}
     select id::text as id from requested union all select id::text from done`,
    [id],
  );
  const task = await taskGet(db, id);
  if (!task) throw new NotFoundError(`task ${id}`);
  if (rows.some((r) => r.id === id)) return task;
  throw new ConflictError(409, 'already_finished', `task ${id} is already ${task.status}`);
}

/**
 * CTEs (`gone`, `redriven`, `restored`, `recount`) that move the dead tasks whose ids the CTE
 * `source` returns from history back into the hot table: pending now, with a fresh attempt
 * budget, their attempts back in sluice.attempts. The insert's trigger lowers their lanes' hints.
 */
function redriveCtes(source: string): string {
  return `
gone as (
  delete from sluice.finished f using ${source} e where f.id = e.id and f.status = 'dead'
  returning f.*
),
redriven as (
  insert into sluice.tasks (id, created_at, expires_at, schedule_slot, parent_id, priority, max_attempts, timeout_ms, lease_ms,
    concurrency_limit, rate_limit, rate_period_ms, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, run_at,
    updated_at, attempts, deferrals, resumes, last_status, last_lease_id, status, result, last_error, queue, concurrency_key,
    dedup_key, schedule, method, content_type, url, headers, body, callback, dedup_ttl_ms)
  overriding system value
  select id, created_at, expires_at, schedule_slot, parent_id, priority, max_attempts, timeout_ms, lease_ms,
    concurrency_limit, rate_limit, rate_period_ms, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, now(),
    now(), 0, 0, resumes, last_status, last_lease_id, 'pending', result, last_error, queue, concurrency_key,
    dedup_key, schedule, method, content_type, url, headers, body, callback, dedup_ttl_ms
  from gone
  returning *
),
restored as (
  insert into sluice.attempts (task_id, attempt, lease_id, started_at, ended_at, outcome, http_status, duration_ms, error)
  select task_id, attempt, lease_id, started_at, ended_at, outcome, http_status, duration_ms, error
  from sluice.all_attempts where task_id in (select id from gone)
),
-- A closed bucket's counts (for /metrics) no longer hold.
recount as (
  update sluice.history_buckets b set counts = null
  where b.counts is not null and b.bucket in (select bucket from gone)
)`;
}

/**
 * Redrives a dead task: pending again now, with a fresh attempt budget. A task with the same
 * dedup key that is unfinished meanwhile makes this a conflict.
 */
export async function taskRedrive(db: Queryable, id: string): Promise<Task> {
  let rows: TaskRow[];
  try {
    rows = await db.query<TaskRow>(
      `with ${LOCK_ORDER_CTE} picked as (select $1::bigint as id),${redriveCtes('picked')}
       select * from redriven`,
      [id],
    );
  } catch (error) {
    if ((error as { code?: string }).code === '23505') {
      throw new ConflictError(409, 'duplicate_unfinished', `task ${id} cannot be retried: another unfinished task has its dedup_key`);
    }
    throw error;
  }
  if (rows[0]) return toTask(rows[0]);
  const task = await taskGet(db, id);
  if (!task) throw new NotFoundError(`task ${id}`);
  throw new ConflictError(409, 'not_dead', `task ${id} is ${task.status}; only dead tasks can be retried`);
}
