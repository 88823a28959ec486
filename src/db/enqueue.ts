/**
 * Enqueue: tasks written all or nothing, in input order, with dedup (an item whose `dedup_key`
 * matches an unfinished task of its queue, or a finished one that keeps its key for a while
 * (`dedup_ttl_ms`, db/dedup-ttl.ts), returns that task), read back whole or as references.
 */
import { ValidationError } from '../core/errors.ts';
import type { Task, TaskStatus } from '../core/types.ts';
import { type Db, prepared, type Queryable } from './db.ts';
import { type Debounce, debounceJoin, debounceRecord } from './debounce.ts';
import { DEDUP_RACED_CTE, dedupHoldersSql, keyNotHeldAfterFinish } from './dedup-ttl.ts';
import { insertWithKeyStrategies, keyStrategyMayApply } from './key-strategy.ts';
import { type Enqueued, INPUT_COLUMNS, inputColumns, type NewTask, parentsMissing } from './new-task.ts';
import { DEFAULT_CONTENT_TYPE, type TaskRow, toTask, UNFINISHED_SQL } from './rows.ts';

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

/** How an enqueue reads back its tasks: every column, or a reference's five. */
interface Shape<R, T> {
  insert: string;
  findByDedup: string;
  /** One task by id, finished or not (a debounced enqueue returns the task it joined). */
  findById: string;
  read(row: R): T;
}

const WHOLE: Shape<TaskRow, Task> = {
  insert: insertSql('*'),
  findByDedup: dedupHoldersSql('t.*'),
  findById: 'select * from sluice.all_tasks where id = $1',
  read: toTask,
};
// Its columns are named, so it can be a prepared statement (parsed and planned once a connection).
const REF_COLUMNS = ['id', 'queue', 'status', 'run_at', 'created_at'];
const REF: Shape<TaskRefRow, TaskRef> = {
  insert: prepared('enqueue_refs', insertSql(REF_COLUMNS.join(', '))),
  findByDedup: dedupHoldersSql(REF_COLUMNS.map((c) => `t.${c}`).join(', ')),
  findById: `select ${REF_COLUMNS.join(', ')} from sluice.all_tasks where id = $1`,
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
-- A keyed task of a queue whose run-time key_strategy is not 'queue' is written under its key's
-- lock (db/key-strategy.ts): unless that is where this runs (the last parameter false), the
-- statement then writes nothing and says so.
strategic as (
  select from input i join sluice.queues q on q.name = i.queue
  where $${INPUT_COLUMNS.length + 1}::boolean and i.concurrency_key is not null and q.options ->> 'key_strategy' <> 'queue'
  limit 1
),
inserted as (
  insert into sluice.tasks (id, queue, url, method, headers, body, content_type, concurrency_key,
    concurrency_limit, rate_limit, rate_period_ms, parent_id, priority, run_at, expires_at, max_attempts,
    backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, timeout_ms, lease_ms, dedup_key, callback, dedup_ttl_ms)
  overriding system value
  select new_id, queue, url, method, headers, body, nullif(content_type, '${DEFAULT_CONTENT_TYPE}'), concurrency_key,
    concurrency_limit, rate_limit, rate_period_ms, parent_id, priority,
    coalesce(run_at, now() + make_interval(secs => coalesce(delay_ms, 0) / 1000.0)),
    coalesce(expires_at, now() + make_interval(secs => ttl_ms / 1000.0)),
    max_attempts, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, timeout_ms, lease_ms, dedup_key, callback, dedup_ttl_ms
  from input
  where not exists (select from strategic) and ${keyNotHeldAfterFinish('input')}
  order by ord
  on conflict (queue, dedup_key) where dedup_key is not null and status in ${UNFINISHED_SQL} do nothing
  returning ${columns}
),
${DEDUP_RACED_CTE}
select i.ord, exists (select from strategic) as key_strategy_in_force,
  (t.id is not null and exists (select from dedup_raced r where r.held_queue = i.queue and r.held_key = i.dedup_key)) as dedup_raced, t.*
from input i left join inserted t on t.id = i.new_id order by i.ord`;
}

/**
 * Inserts tasks, all or nothing, in input order. An item whose `dedupKey` matches an
 * unfinished task of its queue (or an earlier item of the same call), or a finished one whose
 * `dedup_ttl_ms` has not run out, returns that task.
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

async function insertMany<R, T extends { id: string }>(db: Db, tasks: readonly NewTask[], shape: Shape<R, T>): Promise<Enqueued<T>[]> {
  if (tasks.some(keyStrategyMayApply)) return insertUnderKeyStrategies(db, tasks, shape);
  try {
    return await insertUnguarded(db, tasks, shape);
  } catch (error) {
    // A run-time override gave a queue of these tasks a key strategy.
    if (!(error instanceof KeyStrategyInForce)) throw error;
    return insertUnderKeyStrategies(db, tasks, shape);
  }
}

/** The enqueue in one transaction under key strategies (db/key-strategy.ts), tried again as a dedup race asks. */
async function insertUnderKeyStrategies<R, T extends { id: string }>(db: Db, tasks: readonly NewTask[], shape: Shape<R, T>) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction((tx) =>
        insertWithKeyStrategies(tx, tasks, {
          insert: (some) =>
            some.some((t) => t.debounce)
              ? insertWithDebounces(tx, some, shape, false)
              : insertOnce(tx, inputColumns(some), some, shape, false),
          read: async (id) => shape.read((await tx.query<R>(shape.findById, [id]))[0]!),
        }),
      );
    } catch (error) {
      if (!(error instanceof DedupRace) || attempt >= 5) throw error;
    }
  }
}

async function insertUnguarded<R, T>(db: Db, tasks: readonly NewTask[], shape: Shape<R, T>): Promise<Enqueued<T>[]> {
  // A batch with debounced items goes its own way (it builds its inputs per part).
  const debounced = tasks.some((t) => t.debounce);
  const input = debounced ? [] : inputColumns(tasks);
  // Without dedup keys or debounces one statement is the whole, atomic, write.
  if (!debounced && !tasks.some((t) => t.dedupKey !== null)) return insertOnce(db, input, tasks, shape);
  // With them, a conflicting item is looked up afterwards, in the same transaction. The
  // conflicting task may finish between the two statements, or a task holding a key with a TTL
  // while the insert ran (db/dedup-ttl.ts); then try again.
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction((tx) => (debounced ? insertWithDebounces(tx, tasks, shape) : insertOnce(tx, input, tasks, shape)));
    } catch (error) {
      if (!(error instanceof DedupRace) || attempt >= 5) throw error;
    }
  }
}

/**
 * A batch with debounced items (db/debounce.ts), in one transaction: the others in one insert,
 * then each debounced item in input order, joining its key's task or made as the one to join
 * (a trailing one due `periodMs` from now).
 */
async function insertWithDebounces<R, T>(
  q: Queryable,
  tasks: readonly NewTask[],
  shape: Shape<R, T>,
  guarded = true,
): Promise<Enqueued<T>[]> {
  const out: Enqueued<T>[] = new Array(tasks.length);
  const plain = tasks.flatMap((t, i) => (t.debounce ? [] : [i]));
  if (plain.length > 0) {
    const made = await insertOnce(
      q,
      inputColumns(plain.map((i) => tasks[i]!)),
      plain.map((i) => tasks[i]!),
      shape,
      guarded,
    );
    made.forEach((e, n) => {
      out[plain[n]!] = e;
    });
  }
  for (const [i, t] of tasks.entries()) {
    if (!t.debounce) continue;
    const task = t as NewTask & { debounce: Debounce };
    const joined = await debounceJoin(q, task);
    if (joined !== null) {
      const [row] = await q.query<R>(shape.findById, [joined]);
      out[i] = { task: shape.read(row!), deduplicated: false, debounced: true };
      continue;
    }
    const first = task.debounce.mode === 'trailing' ? { ...task, runAt: null, delayMs: task.debounce.periodMs } : task;
    const [made] = await insertOnce(q, inputColumns([first]), [first], shape, guarded);
    await debounceRecord(q, task, (made!.task as { id: string }).id);
    out[i] = { ...made!, debounced: false };
  }
  return out;
}

class DedupRace extends Error {
  override name = 'DedupRace';
}

/** The insert found a queue whose run-time override sets a key strategy: it wrote nothing. */
class KeyStrategyInForce extends Error {
  override name = 'KeyStrategyInForce';
}

/** `guarded`: a keyed task of a queue with a key strategy makes the insert write nothing (`KeyStrategyInForce`). */
async function insertOnce<R, T>(
  q: Queryable,
  input: unknown[][],
  tasks: readonly NewTask[],
  shape: Shape<R, T>,
  guarded = true,
): Promise<Enqueued<T>[]> {
  const parents = [...new Set(tasks.flatMap((t) => (t.parentId === null ? [] : [t.parentId])))];
  if (parents.length > 0) {
    // A child's parent is a task that has not finished (so never the child itself): a finished
    // one has nobody left to wait for it.
    const open = await q.query<{ id: string }>(
      `select id::text as id from sluice.tasks where id = any($1::bigint[]) and status in ${UNFINISHED_SQL}`,
      [parents],
    );
    const missing = parents.filter((p) => !open.some((o) => o.id === p));
    if (missing.length > 0) throw parentsMissing(missing);
  }
  // A row of the left join whose insert met a dedup conflict (or a finished task holding its
  // key) has every column null.
  let rows: Array<R & { ord: number; id: string | null; key_strategy_in_force: boolean; dedup_raced: boolean }>;
  try {
    rows = await q.query(shape.insert, [...input, guarded]);
  } catch (error) {
    // The only foreign key a client names: parent_id.
    if ((error as { code?: string }).code === '23503') throw new ValidationError([{ path: 'parent_id', message: 'names no task' }]);
    throw error;
  }
  if (rows[0]?.key_strategy_in_force) throw new KeyStrategyInForce('a key strategy applies: enqueue under the key lock');
  if (rows.some((r) => r.dedup_raced)) throw new DedupRace('a task holding a dedup key finished during the enqueue');
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
