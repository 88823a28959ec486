/**
 * Key strategies (docs/DESIGN.md §2): what an enqueue does to a concurrency key that has
 * unfinished tasks, by the queue's `key_strategy` (core/queue-settings.ts). Applied in the
 * enqueue's transaction under a lock on each (queue, key), so racing enqueues of one key take
 * their turns: the one that decides sees every task an earlier one made or cancelled.
 */
import type { KeyStrategy } from '../core/queue-settings.ts';
import type { Queryable } from './db.ts';
import { archiveCtes } from './history.ts';
import type { Enqueued, KeyCancelled, NewTask } from './new-task.ts';
import { UNFINISHED_SQL } from './rows.ts';

export interface QueueKey {
  queue: string;
  key: string;
}

/** A key's identity in maps: queue and key, unambiguous whatever either holds. */
export const keyIdentity = (k: QueueKey): string => JSON.stringify([k.queue, k.key]);

/**
 * Takes the transaction's lock on each key, in one order (by the lock's hash) so that two
 * enqueues of several keys never wait on each other. The sort is in a subquery, which Postgres
 * does not flatten, so the locks are taken in its order.
 */
export async function keyStrategyLock(q: Queryable, keys: readonly QueueKey[]): Promise<void> {
  if (keys.length === 0) return;
  await q.query(
    `select count(pg_advisory_xact_lock(h)) from (
       select distinct hashtextextended('sluice.key_strategy ' || k.queue || ' ' || k.key, 0) as h
       from unnest($1::text[], $2::text[]) as k(queue, key)
       order by h
     ) locks`,
    [keys.map((k) => k.queue), keys.map((k) => k.key)],
  );
}

/**
 * Each queue's strategy in force: its run-time override (sluice.queues), else the environment's
 * (`env`, from SLUICE_QUEUES), else `queue`. Read after the key locks, in the enqueue's
 * transaction, so the strategy applied is the one in force when the insert is made.
 */
export async function keyStrategiesRead(q: Queryable, env: ReadonlyMap<string, KeyStrategy>): Promise<Map<string, KeyStrategy>> {
  const queues = [...env.keys()];
  const rows = await q.query<{ queue: string; key_strategy: KeyStrategy }>(
    `select e.queue,
            coalesce(q.options ->> 'key_strategy', e.env, 'queue') as key_strategy
     from unnest($1::text[], $2::text[]) as e(queue, env)
     left join sluice.queues q on q.name = e.queue`,
    [queues, queues.map((name) => env.get(name)!)],
  );
  return new Map(rows.map((r) => [r.queue, r.key_strategy]));
}

/** The oldest unfinished task of each key that has one, by `keyIdentity`. */
export async function keyTasksUnfinished(q: Queryable, keys: readonly QueueKey[]): Promise<Map<string, string>> {
  if (keys.length === 0) return new Map();
  const rows = await q.query<{ queue: string; key: string; id: string }>(
    `select distinct on (t.queue, t.concurrency_key) t.queue, t.concurrency_key as key, t.id::text as id
     from unnest($1::text[], $2::text[]) as k(queue, key)
     join sluice.tasks t on t.queue = k.queue and t.lane = 'k:' || k.key and t.status in ${UNFINISHED_SQL}
     order by t.queue, t.concurrency_key, t.id`,
    [keys.map((k) => k.queue), keys.map((k) => k.key)],
  );
  return new Map(rows.map((r) => [keyIdentity(r), r.id]));
}

/** Whose tasks a key strategy cancels: a key's unfinished ones (`running`) or only its pending ones; or tasks by id. */
export interface CancelRoots {
  keys: ReadonlyArray<QueueKey & { running: boolean }>;
  ids: readonly string[];
}

/**
 * Cancels the roots and, as a cancel does (db/tasks.ts `taskCancel`), every unfinished task below
 * them. A root ends at once whatever its state: a leased one is `cancelled` now, its lease ended
 * (its push's answer and its holder's calls then find no lease: db/settle.ts, 409 `cancelled`),
 * its slot free. A descendant that is leased is asked to stop, as by a cancel. Rows are locked
 * and read as they are now: a pending root of `replace_pending` claimed meanwhile keeps running.
 */
export async function keyTasksCancel(q: Queryable, roots: CancelRoots, reason: string): Promise<KeyCancelled[]> {
  if (roots.keys.length === 0 && roots.ids.length === 0) return [];
  const rows = await q.query<{ id: string; queue: string; key: string | null; lease_id: string | null }>(
    `with recursive keys as (
       select * from unnest($1::text[], $2::text[], $3::boolean[]) as k(queue, key, running)
     ),
     -- Through the indexes by lane of each status.
     roots as (
       select t.id from keys k join sluice.tasks t on t.queue = k.queue and t.lane = 'k:' || k.key and t.status = 'pending'
       union all
       select t.id from keys k join sluice.tasks t on t.queue = k.queue and t.lane = 'k:' || k.key and t.status = 'leased'
       where k.running
       union all
       select t.id from keys k join sluice.tasks t on t.queue = k.queue and t.lane = 'k:' || k.key and t.status = 'waiting'
       where k.running
       union all
       select unnest($4::bigint[])
     ),
     doomed as (
       select id from roots
       union
       select c.id from sluice.tasks c join doomed d on c.parent_id = d.id where c.status in ${UNFINISHED_SQL}
     ),
     locked as (
       select t.id, t.status, t.id in (select id from roots) as root,
              (t.id = any($4::bigint[])
               or exists (select 1 from keys k where k.queue = t.queue and k.key = t.concurrency_key and k.running)) as running
       from sluice.tasks t
       where t.id in (select id from doomed) and t.status in ${UNFINISHED_SQL}
       order by t.id
       for update of t
     ),
     requested as (
       update sluice.tasks t set cancel_requested_at = coalesce(t.cancel_requested_at, now()), updated_at = now()
       from locked l where t.id = l.id and l.status = 'leased' and not l.root
       returning t.id
     ),
     done as (
       delete from sluice.tasks t using locked l
       where t.id = l.id and (case when l.root then l.running or l.status = 'pending' else l.status <> 'leased' end)
       returning t.*, 'cancelled' as fin_status, t.result as fin_result, case when l.root then $5::text end as fin_error,
                 case when t.status <> 'leased' then t.last_status end as fin_http_status, t.status = 'leased' as fin_attempt,
                 case when t.status = 'leased' then (extract(epoch from now() - t.leased_at) * 1000)::integer end as fin_duration_ms
     ),${archiveCtes('done')}
     select id::text as id, queue, concurrency_key as key, lease_id::text as lease_id from done`,
    [roots.keys.map((k) => k.queue), roots.keys.map((k) => k.key), roots.keys.map((k) => k.running), roots.ids, reason],
  );
  return rows.map((r) => ({ id: r.id, queue: r.queue, key: r.key, leaseId: r.lease_id }));
}

/** Whether a task's queue may have a strategy for it: keyed, and the environment's is not `queue` (an override is read under the lock). */
export function keyStrategyMayApply(t: Pick<NewTask, 'concurrencyKey' | 'keyStrategy'>): boolean {
  return t.concurrencyKey !== null && (t.keyStrategy ?? 'queue') !== 'queue';
}

/** What the strategies drive of the enqueue: inserting some of its tasks (as the enqueue does), and reading one back. */
export interface KeyStrategyWrites<T> {
  insert(tasks: readonly NewTask[]): Promise<Enqueued<T>[]>;
  read(id: string): Promise<T>;
}

const REASON = 'cancelled: a newer task of its concurrency key was enqueued (key_strategy)';

/**
 * Enqueues `tasks` in a transaction (`q`), applying each queue's key strategy in input order:
 * a later item of a key sees what an earlier one made or cancelled.
 */
export async function insertWithKeyStrategies<T extends { id: string }>(
  q: Queryable,
  tasks: readonly NewTask[],
  writes: KeyStrategyWrites<T>,
): Promise<Enqueued<T>[]> {
  const keyOf = (t: NewTask): QueueKey | null => (t.concurrencyKey === null ? null : { queue: t.queue, key: t.concurrencyKey });
  await keyStrategyLock(
    q,
    tasks.flatMap((t) => keyOf(t) ?? []),
  );
  const strategies = await keyStrategiesRead(q, new Map(tasks.map((t) => [t.queue, t.keyStrategy ?? 'queue'])));
  const strategyOf = (t: NewTask): KeyStrategy => (t.concurrencyKey === null ? 'queue' : (strategies.get(t.queue) ?? 'queue'));
  // An item with a dedup key or a debounce may make no task of its own: the plan of one pass
  // (each insert makes its key's task) would not hold for the items of its key after it. Such a
  // batch naming a key twice goes one item at a time.
  const seen = new Set<string>();
  let stepwise = false;
  for (const t of tasks) {
    const k = keyOf(t);
    if (k === null || strategyOf(t) === 'queue') continue;
    if (seen.has(keyIdentity(k)) && tasks.some((u) => strategyOf(u) !== 'queue' && (u.dedupKey !== null || u.debounce))) stepwise = true;
    seen.add(keyIdentity(k));
  }
  if (!stepwise) return (await applyInOnePass(q, tasks, strategyOf, writes)).out;
  const out: Enqueued<T>[] = [];
  const cancelled = new Set<string>();
  for (const t of tasks) {
    const pass = await applyInOnePass(q, [t], strategyOf, writes);
    out.push(...pass.out);
    for (const id of pass.cancelled) cancelled.add(id);
  }
  // An item a later one cancelled is answered as it is now.
  for (const [i, e] of out.entries()) if (!e.skipped && cancelled.has(e.task.id)) out[i] = { ...e, task: await writes.read(e.task.id) };
  return out;
}

async function applyInOnePass<T extends { id: string }>(
  q: Queryable,
  tasks: readonly NewTask[],
  strategyOf: (t: NewTask) => KeyStrategy,
  writes: KeyStrategyWrites<T>,
): Promise<{ out: Enqueued<T>[]; cancelled: string[] }> {
  const identity = (t: NewTask) => keyIdentity({ queue: t.queue, key: t.concurrencyKey ?? '' });
  const cancelKeys = new Map<string, QueueKey & { running: boolean }>();
  const newest = new Map<string, QueueKey>();
  for (const t of tasks) {
    const strategy = strategyOf(t);
    if (t.concurrencyKey === null || strategy === 'queue') continue;
    const key = { queue: t.queue, key: t.concurrencyKey };
    if (strategy === 'cancel_newest') newest.set(identity(t), key);
    else cancelKeys.set(identity(t), { ...key, running: strategy === 'cancel_in_progress' });
  }
  // What the key holds before this enqueue: cancelled first, so that a dedup key it held is free.
  const ended = await keyTasksCancel(q, { keys: [...cancelKeys.values()], ids: [] }, REASON);
  const existing = await keyTasksUnfinished(q, [...newest.values()]);
  // cancel_newest: the first item of a key without an unfinished task makes it; the rest are answered with it.
  const skip: Array<{ existing: string } | { item: number } | null> = tasks.map(() => null);
  const maker = new Map<string, number>();
  tasks.forEach((t, i) => {
    if (strategyOf(t) !== 'cancel_newest') return;
    const id = identity(t);
    const held = existing.get(id);
    const made = maker.get(id);
    if (held !== undefined) skip[i] = { existing: held };
    else if (made !== undefined) skip[i] = { item: made };
    else maker.set(id, i);
  });
  const toInsert = tasks.flatMap((_, i) => (skip[i] === null ? [i] : []));
  const out: Enqueued<T>[] = new Array(tasks.length);
  const inserted = toInsert.length === 0 ? [] : await writes.insert(toInsert.map((i) => tasks[i]!));
  inserted.forEach((e, n) => {
    out[toInsert[n]!] = e;
  });
  // The batch's own tasks of a cancelling key: each cancels the ones before it, so only the last stays.
  const last = new Map<string, number>();
  const superseded: number[] = [];
  for (const i of toInsert) {
    const t = tasks[i]!;
    const e = out[i]!;
    if (!cancelKeys.has(identity(t)) || e.deduplicated || e.debounced) continue;
    const before = last.get(identity(t));
    if (before !== undefined) superseded.push(before);
    last.set(identity(t), i);
  }
  if (superseded.length > 0) {
    await keyTasksCancel(q, { keys: [], ids: superseded.map((i) => out[i]!.task.id) }, REASON);
    for (const i of superseded) out[i] = { ...out[i]!, task: await writes.read(out[i]!.task.id) };
  }
  for (const [i, s] of skip.entries()) {
    if (s === null) continue;
    const task = 'existing' in s ? await writes.read(s.existing) : out[s.item]!.task;
    out[i] = { task, deduplicated: false, skipped: true };
  }
  // The leases ended, on the last item of their key: the route pokes for their slots (and stops their pushes).
  for (const c of ended) {
    if (c.leaseId === null) continue;
    const i = tasks.findLastIndex((t) => t.queue === c.queue && t.concurrencyKey === c.key);
    const at = i >= 0 ? i : tasks.length - 1;
    out[at] = { ...out[at]!, endedLeases: [...(out[at]!.endedLeases ?? []), c] };
  }
  return { out, cancelled: ended.map((c) => c.id) };
}
