/** Task rows: enqueue (with dedup), read, list, cancel. */
import { ConflictError, NotFoundError, ValidationError } from '../core/errors.ts';
import type { Backoff, HttpMethod, Task, TaskStatus } from '../core/types.ts';
import { type Db, prepared, type Queryable } from './db.ts';
import { archiveCtes, endedUnleased, LOCK_ORDER_CTE } from './history.ts';
import { DEFAULT_CONTENT_TYPE, type TaskRow, toBackoffJson, toTask, UNFINISHED_SQL } from './rows.ts';

/** A task to insert, every default already resolved. Times are the database's. */
export interface NewTask {
  queue: string;
  url: string;
  method: HttpMethod;
  headers: Record<string, string>;
  body: string | null;
  contentType: string;
  concurrencyKey: string | null;
  concurrencyLimit: number | null;
  rateLimit: { limit: number; period_ms: number } | null;
  parentId: string | null;
  priority: number;
  /** Not before: an absolute time, or a delay from the database's `now()`. */
  runAt: Date | null;
  delayMs: number | null;
  /** Not started after: an absolute time, or a time-to-live from `now()`. */
  expiresAt: Date | null;
  ttlMs: number | null;
  maxAttempts: number;
  backoff: Backoff;
  timeoutMs: number;
  leaseMs: number;
  dedupKey: string | null;
}

export interface Enqueued<T = Task> {
  task: T;
  /** True when an unfinished task with the same `dedup_key` was returned instead. */
  deduplicated: boolean;
}

/** What a lean enqueue reads back of each task: where it went, and when it comes due. */
export interface TaskRef {
  id: string;
  queue: string;
  status: TaskStatus;
  runAt: Date;
  createdAt: Date;
}

interface TaskRefRow {
  id: string;
  queue: string;
  status: TaskStatus;
  run_at: Date;
  created_at: Date;
}

/**
 * The enqueue's input: one typed array per column, a task per index (`inputColumns`). Postgres
 * reads typed arrays for about two thirds of what the same tasks as a JSON document cost it.
 */
const INPUT_COLUMNS = [
  ['queue', 'text'],
  ['url', 'text'],
  ['method', 'text'],
  ['headers', 'jsonb'],
  ['body', 'text'],
  ['content_type', 'text'],
  ['concurrency_key', 'text'],
  ['concurrency_limit', 'integer'],
  ['rate_limit', 'integer'],
  ['rate_period_ms', 'integer'],
  ['parent_id', 'bigint'],
  ['priority', 'integer'],
  ['run_at', 'timestamptz'],
  ['delay_ms', 'bigint'],
  ['expires_at', 'timestamptz'],
  ['ttl_ms', 'bigint'],
  ['max_attempts', 'integer'],
  ['backoff_initial_ms', 'integer'],
  ['backoff_max_ms', 'integer'],
  ['backoff_factor', 'float8'],
  ['backoff_jitter', 'float8'],
  ['timeout_ms', 'integer'],
  ['lease_ms', 'integer'],
  ['dedup_key', 'text'],
] as const;

type InputColumn = (typeof INPUT_COLUMNS)[number][0];

/** The tasks as the insert's parameters, in `INPUT_COLUMNS` order. */
function inputColumns(tasks: readonly NewTask[]): unknown[][] {
  const rows = tasks.map((t) => {
    const { backoff, headers, ...row } = toInputRow(t, 0);
    const values: Record<InputColumn, unknown> = {
      ...row,
      headers: JSON.stringify(headers),
      backoff_initial_ms: backoff.initial_ms,
      backoff_max_ms: backoff.max_ms,
      backoff_factor: backoff.factor,
      backoff_jitter: backoff.jitter,
    };
    return values;
  });
  return INPUT_COLUMNS.map(([name]) => rows.map((r) => r[name]));
}

/** How an enqueue reads back its tasks: every column, or a reference's five. */
interface Shape<R, T> {
  insert: string;
  findByDedup: string;
  read(row: R): T;
}

const WHOLE: Shape<TaskRow, Task> = { insert: insertSql('*'), findByDedup: findUnfinishedByDedupSql('t.*'), read: toTask };
// Its columns are named, so it can be a prepared statement (parsed and planned once a connection).
const REF_COLUMNS = ['id', 'queue', 'status', 'run_at', 'created_at'];
const REF: Shape<TaskRefRow, TaskRef> = {
  insert: prepared('enqueue_refs', insertSql(REF_COLUMNS.join(', '))),
  findByDedup: findUnfinishedByDedupSql(REF_COLUMNS.map((c) => `t.${c}`).join(', ')),
  read: (r) => ({ id: String(r.id), queue: r.queue, status: r.status, runAt: r.run_at, createdAt: r.created_at }),
};

function insertSql(columns: string): string {
  const params = INPUT_COLUMNS.map(([, type], i) => `$${i + 1}::${type}[]`).join(', ');
  const names = INPUT_COLUMNS.map(([name]) => name).join(', ');
  return `
with input as materialized (
  select x.*, (x.n - 1)::integer as ord, nextval(pg_get_serial_sequence('sluice.tasks', 'id')) as new_id
  from unnest(${params}) with ordinality as x(${names}, n)
),
inserted as (
  insert into sluice.tasks (id, queue, url, method, headers, body, content_type, concurrency_key,
    concurrency_limit, rate_limit, rate_period_ms, parent_id, priority, run_at, expires_at, max_attempts,
    backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, timeout_ms, lease_ms, dedup_key)
  overriding system value
  select new_id, queue, url, method, headers, body, nullif(content_type, '${DEFAULT_CONTENT_TYPE}'), concurrency_key,
    concurrency_limit, rate_limit, rate_period_ms, parent_id, priority,
    coalesce(run_at, now() + make_interval(secs => coalesce(delay_ms, 0) / 1000.0)),
    coalesce(expires_at, now() + make_interval(secs => ttl_ms / 1000.0)),
    max_attempts, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, timeout_ms, lease_ms, dedup_key
  from input
  order by ord
  on conflict (queue, dedup_key) where dedup_key is not null and status in ${UNFINISHED_SQL} do nothing
  returning ${columns}
)
select i.ord, t.* from input i left join inserted t on t.id = i.new_id order by i.ord`;
}

function findUnfinishedByDedupSql(columns: string): string {
  return `
select k.queue as dedup_queue, k.dedup_key as dedup_match, ${columns}
from sluice.tasks t
join unnest($1::text[], $2::text[]) as k(queue, dedup_key)
  on t.queue = k.queue and t.dedup_key = k.dedup_key
where t.status in ${UNFINISHED_SQL}`;
}

/**
 * Inserts tasks, all or nothing, in input order. An item whose `dedupKey` matches an
 * unfinished task of its queue (or an earlier item of the same call) returns that task.
 */
export function taskInsertMany(db: Db, tasks: readonly NewTask[]): Promise<Enqueued<Task>[]> {
  return insertMany(db, tasks, WHOLE);
}

/**
 * The same write, reading back only each task's reference: a bulk enqueue that does not need
 * the tasks whole spares Postgres, the driver and the response about 300 bytes a task.
 */
export function taskInsertManyRefs(db: Db, tasks: readonly NewTask[]): Promise<Enqueued<TaskRef>[]> {
  return insertMany(db, tasks, REF);
}

async function insertMany<R, T>(db: Db, tasks: readonly NewTask[], shape: Shape<R, T>): Promise<Enqueued<T>[]> {
  const input = inputColumns(tasks);
  // Without dedup keys one statement is the whole, atomic, write.
  if (!tasks.some((t) => t.dedupKey !== null)) return insertOnce(db, input, tasks, shape);
  // With them, a conflicting item is looked up afterwards, in the same transaction. The
  // conflicting task may finish between the two statements; then try again.
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction((tx) => insertOnce(tx, input, tasks, shape));
    } catch (error) {
      if (!(error instanceof DedupRace) || attempt >= 5) throw error;
    }
  }
}

class DedupRace extends Error {
  override name = 'DedupRace';
}

async function insertOnce<R, T>(q: Queryable, input: unknown[][], tasks: readonly NewTask[], shape: Shape<R, T>): Promise<Enqueued<T>[]> {
  const parents = [...new Set(tasks.flatMap((t) => (t.parentId === null ? [] : [t.parentId])))];
  if (parents.length > 0) {
    // A child's parent is a task that has not finished (so never the child itself): a finished
    // one has nobody left to wait for it.
    const open = await q.query<{ id: string }>(
      `select id::text as id from sluice.tasks where id = any($1::bigint[]) and status in ${UNFINISHED_SQL}`,
      [parents],
    );
    const missing = parents.filter((p) => !open.some((o) => o.id === p));
    if (missing.length > 0) throw new ValidationError([{ path: 'parent_id', message: `names no unfinished task (${missing.join(', ')})` }]);
  }
  // A row of the left join whose insert met a dedup conflict has every column null.
  let rows: Array<R & { ord: number; id: string | null }>;
  try {
    rows = await q.query(shape.insert, input);
  } catch (error) {
    // The only foreign key a client names: parent_id.
    if ((error as { code?: string }).code === '23503') throw new ValidationError([{ path: 'parent_id', message: 'names no task' }]);
    throw error;
  }
  const missing = rows.filter((r) => r.id === null).map((r) => tasks[r.ord]!);
  let existing = new Map<string, T>();
  if (missing.length > 0) {
    const found = await q.query<R & { dedup_queue: string; dedup_match: string }>(shape.findByDedup, [
      missing.map((t) => t.queue),
      missing.map((t) => t.dedupKey),
    ]);
    existing = new Map(found.map((r) => [dedupIdentity(r.dedup_queue, r.dedup_match), shape.read(r)]));
  }
  return rows.map((row) => {
    if (row.id !== null) return { task: shape.read(row), deduplicated: false };
    const t = tasks[row.ord]!;
    const task = existing.get(dedupIdentity(t.queue, t.dedupKey));
    if (!task) throw new DedupRace('a deduplicated task finished during the enqueue');
    return { task, deduplicated: true };
  });
}

function dedupIdentity(queue: string, dedupKey: string | null): string {
  return JSON.stringify([queue, dedupKey]);
}

/** A task as the insert statement reads it (snake_case JSON); schedules keep their template in this form. */
export type TaskInputRow = ReturnType<typeof toInputRow>;

export function toInputRow(t: NewTask, ord: number) {
  return {
    ord,
    queue: t.queue,
    url: t.url,
    method: t.method,
    headers: t.headers,
    body: t.body,
    content_type: t.contentType,
    concurrency_key: t.concurrencyKey,
    concurrency_limit: t.concurrencyLimit,
    rate_limit: t.rateLimit?.limit ?? null,
    rate_period_ms: t.rateLimit?.period_ms ?? null,
    parent_id: t.parentId,
    priority: t.priority,
    run_at: t.runAt?.toISOString() ?? null,
    delay_ms: t.delayMs,
    expires_at: t.expiresAt?.toISOString() ?? null,
    ttl_ms: t.ttlMs,
    max_attempts: t.maxAttempts,
    backoff: toBackoffJson(t.backoff),
    timeout_ms: t.timeoutMs,
    lease_ms: t.leaseMs,
    dedup_key: t.dedupKey,
  };
}

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
  limit: number;
}

/** Newest first. */
export async function taskList(db: Queryable, f: TaskFilter): Promise<Task[]> {
  const rows = await db.query<TaskRow>(
    `select * from sluice.all_tasks
     where ($1::text is null or queue = $1)
       and ($2::text is null or status = $2)
       and ($3::text is null or concurrency_key = $3)
       and ($4::bigint is null or id < $4)
     order by id desc
     limit $5`,
    [f.queue ?? null, f.status ?? null, f.concurrencyKey ?? null, f.beforeId ?? null, f.limit],
  );
  return rows.map(toTask);
}

/** Which dead tasks a bulk redrive takes. */
export interface DeadFilter {
  queue?: string | undefined;
  concurrencyKey?: string | undefined;
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
         where status = 'dead' and ($1::text is null or queue = $1) and ($2::text is null or concurrency_key = $2)
           and ($3::bigint is null or id > $3)
         order by id
         limit $4
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
      [filter.queue ?? null, filter.concurrencyKey ?? null, afterId, limit],
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
       where status = 'dead' and ($1::text is null or queue = $1) and ($2::text is null or concurrency_key = $2)
       limit $3
     ) matching`,
    [filter.queue ?? null, filter.concurrencyKey ?? null, cap],
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
    dedup_key, schedule, method, content_type, url, headers, body)
  overriding system value
  select id, created_at, expires_at, schedule_slot, parent_id, priority, max_attempts, timeout_ms, lease_ms,
    concurrency_limit, rate_limit, rate_period_ms, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, now(),
    now(), 0, 0, resumes, last_status, last_lease_id, 'pending', result, last_error, queue, concurrency_key,
    dedup_key, schedule, method, content_type, url, headers, body
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
