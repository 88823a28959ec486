/** Queue settings at run time, per-key limits, counts and slot holders (docs/DESIGN.md §5). */
import type { QueueLimitSettings, Rate } from '../core/limits.ts';
import type { LeasedTask } from '../core/types.ts';
import type { Queryable } from './db.ts';
import { type TaskRow, toTask, UNFINISHED_SQL } from './rows.ts';
import { leasesTakeBack } from './settle.ts';

export interface QueueOverride {
  queue: string;
  settings: QueueLimitSettings;
  updatedAt: Date;
}

interface QueueRow {
  name: string;
  options: Omit<QueueLimitSettings, 'paused'>;
  paused: boolean | null;
  updated_at: Date;
}

function toOverride(row: QueueRow): QueueOverride {
  const settings: QueueLimitSettings = { ...row.options };
  if (row.paused !== null) settings.paused = row.paused;
  return { queue: row.name, settings, updatedAt: row.updated_at };
}

export async function queueOverrides(db: Queryable): Promise<Map<string, QueueOverride>> {
  const rows = await db.query<QueueRow>('select * from sluice.queues order by name');
  return new Map(rows.map((r) => [r.name, toOverride(r)]));
}

export async function queueOverride(db: Queryable, queue: string): Promise<QueueOverride | null> {
  const rows = await db.query<QueueRow>('select * from sluice.queues where name = $1', [queue]);
  return rows[0] ? toOverride(rows[0]) : null;
}

/** A change to a queue's overrides: a value sets a field, `null` removes it, absent keeps it. */
export type QueueOverridePatch = { [F in keyof QueueLimitSettings]?: QueueLimitSettings[F] | null };

/** Applies a patch to a queue's overrides (creating them) and returns the result. */
export async function queueOverridePatch(db: Queryable, queue: string, patch: QueueOverridePatch): Promise<QueueOverride> {
  const { paused, ...options } = patch;
  const rows = await db.query<QueueRow>(
    `insert into sluice.queues (name, options, paused) values ($1, jsonb_strip_nulls($2::jsonb), $3)
     on conflict (name) do update
       set options = jsonb_strip_nulls(sluice.queues.options || $2::jsonb),
           paused = case when $4 then excluded.paused else sluice.queues.paused end,
           updated_at = now()
     returning *`,
    [queue, JSON.stringify(options), paused ?? null, paused !== undefined],
  );
  return toOverride(rows[0]!);
}

/** Drops every run-time override of a queue; returns whether there were any. */
export async function queueOverrideDelete(db: Queryable, queue: string): Promise<boolean> {
  return (await db.query('delete from sluice.queues where name = $1 returning name', [queue])).length > 0;
}

export async function keyLimitPut(db: Queryable, queue: string, key: string, limit: number): Promise<void> {
  await db.query(
    `insert into sluice.key_limits (queue, concurrency_key, "limit") values ($1, $2, $3)
     on conflict (queue, concurrency_key) do update set "limit" = excluded."limit", updated_at = now()`,
    [queue, key, limit],
  );
}

export async function keyLimitDelete(db: Queryable, queue: string, key: string): Promise<boolean> {
  const rows = await db.query('delete from sluice.key_limits where queue = $1 and concurrency_key = $2 returning 1', [queue, key]);
  return rows.length > 0;
}

export interface QueueCounts {
  pending: number;
  leased: number;
  waiting: number;
  dead: number;
}

/** Pending, leased and dead tasks per queue (all queues, or one). */
export async function queueCounts(db: Queryable, queue?: string): Promise<Map<string, QueueCounts>> {
  const rows = await db.query<{ queue: string; pending: number; leased: number; waiting: number; dead: number }>(
    `select queue,
            count(*) filter (where status = 'pending')::int as pending,
            count(*) filter (where status = 'leased')::int as leased,
            count(*) filter (where status = 'waiting')::int as waiting,
            count(*) filter (where status = 'dead')::int as dead
     from (
       select queue, status from sluice.tasks where status in ${UNFINISHED_SQL} and ($1::text is null or queue = $1)
       union all
       select queue, status from sluice.finished where status = 'dead' and ($1::text is null or queue = $1)
     ) t
     group by queue`,
    [queue ?? null],
  );
  return new Map(rows.map((r) => [r.queue, { pending: r.pending, leased: r.leased, waiting: r.waiting, dead: r.dead }]));
}

/** Every queue Sluice knows from the database: with lanes, overrides or key limits. */
export async function queueNamesKnown(db: Queryable): Promise<string[]> {
  const rows = await db.query<{ queue: string }>(
    `select queue from (
       select distinct queue from sluice.lanes
       union select name from sluice.queues
       union select distinct queue from sluice.key_limits
     ) q order by queue`,
  );
  return rows.map((r) => r.queue);
}

export interface SlotHolder {
  taskId: string;
  concurrencyKey: string | null;
  leaseId: string;
  /** The attempt this lease is (1 for the first push). */
  attempt: number;
  leasedAt: Date;
  expiresAt: Date;
}

export interface ConcurrencySnapshot {
  /** The database's clock when read: lease times are on it. */
  now: Date;
  clusterActive: number;
  holders: SlotHolder[];
  /** Per key: the limit and the rate its first task gave, and the run-time limit override. */
  keyLimits: Map<string, { taskLimit: number | null; override: number | null; taskRate: Rate | null }>;
  /** Rate-limit grants still inside their period, per key ('*': the queue's own). */
  rateUsed: Map<string, number>;
  /** Waiting tasks (waits on children) and which of their slots they lent to a child. */
  waiting: Array<{ taskId: string; concurrencyKey: string | null; lentQueue: boolean; lentKey: boolean }>;
  /** What each level learnt from its endpoint (0016_levels.sql), per key ('*': the queue's own). */
  learnt: Map<string, Learnt>;
  /** The arrival time of each rate bucket (a rate with `burst`, 0017_rate_burst.sql), per key ('*': the queue's own). */
  buckets: Map<string, Date>;
}

/** A level's learnt limit (adaptive queues) and hold (a Retry-After), and why either last moved. */
export interface Learnt {
  effective: number | null;
  heldUntil: Date | null;
  reason: string | null;
  movedAt: Date | null;
}

/** Who holds the queue's slots, and the per-key limit inputs, in one consistent read. */
export async function concurrencySnapshot(db: Queryable, queue: string): Promise<ConcurrencySnapshot> {
  const rows = await db.query<{
    now: Date;
    cluster_active: number;
    holders: Array<{
      task_id: string;
      concurrency_key: string | null;
      lease_id: string;
      attempt: number;
      leased_at: string;
      expires_at: string;
    }> | null;
    keys: Array<{
      key: string;
      task_limit: number | null;
      override: number | null;
      rate_limit: number | null;
      rate_period_ms: number | null;
    }> | null;
    rate_used: Record<string, number> | null;
    waiting: Array<{ task_id: string; concurrency_key: string | null; lent_queue: boolean; lent_key: boolean }> | null;
    levels: Record<string, { effective: number | null; held_until: string | null; reason: string | null; moved_at: string | null }> | null;
    buckets: Record<string, string> | null;
  }>(
    `select now() as now,
       (select count(*)::int from sluice.tasks where status = 'leased') as cluster_active,
       (select json_agg(json_build_object('task_id', id::text, 'concurrency_key', concurrency_key, 'lease_id', lease_id,
                                          'attempt', attempts, 'leased_at', leased_at, 'expires_at', lease_expires_at)
                        order by leased_at, id)
          from sluice.tasks where status = 'leased' and queue = $1) as holders,
       (select json_agg(json_build_object('key', coalesce(k.key, l.concurrency_key), 'task_limit', k.task_limit, 'override', l."limit",
                                          'rate_limit', k.task_rate_limit, 'rate_period_ms', k.task_rate_period_ms))
          from (select substr(lane, 3) as key, task_limit, task_rate_limit, task_rate_period_ms from sluice.lanes where queue = $1 and lane <> '') k
          full join (select concurrency_key, "limit" from sluice.key_limits where queue = $1) l on l.concurrency_key = k.key
          where k.task_limit is not null or l."limit" is not null or k.task_rate_limit is not null) as keys,
       (select json_object_agg(case when lane = '*' then '*' else substr(lane, 3) end, n)
          from (select lane, count(*)::int as n from sluice.rate_grants where queue = $1 and until > now() group by lane) g) as rate_used,
       (select json_agg(json_build_object('task_id', id::text, 'concurrency_key', concurrency_key, 'lent_queue', lent_queue, 'lent_key', lent_key)
                        order by id)
          from sluice.tasks where status = 'waiting' and queue = $1) as waiting,
       (select json_object_agg(case when lane = '*' then '*' else substr(lane, 3) end,
                               json_build_object('effective', effective, 'held_until', held_until, 'reason', reason, 'moved_at', moved_at))
          from sluice.levels where queue = $1) as levels,
       (select json_object_agg(case when lane = '*' then '*' else substr(lane, 3) end, tat)
          from sluice.rate_buckets where queue = $1) as buckets`,
    [queue],
  );
  const row = rows[0]!;
  return {
    now: new Date(row.now),
    clusterActive: row.cluster_active,
    holders: (row.holders ?? []).map((h) => ({
      taskId: h.task_id,
      concurrencyKey: h.concurrency_key,
      leaseId: h.lease_id,
      attempt: h.attempt,
      leasedAt: new Date(h.leased_at),
      expiresAt: new Date(h.expires_at),
    })),
    keyLimits: new Map(
      (row.keys ?? []).map((k) => [
        k.key,
        {
          taskLimit: k.task_limit,
          override: k.override,
          taskRate: k.rate_limit === null || k.rate_period_ms === null ? null : { limit: k.rate_limit, period_ms: k.rate_period_ms },
        },
      ]),
    ),
    rateUsed: new Map(Object.entries(row.rate_used ?? {})),
    waiting: (row.waiting ?? []).map((w) => ({
      taskId: w.task_id,
      concurrencyKey: w.concurrency_key,
      lentQueue: w.lent_queue,
      lentKey: w.lent_key,
    })),
    buckets: new Map(Object.entries(row.buckets ?? {}).map(([key, tat]) => [key, new Date(tat)])),
    learnt: new Map(
      Object.entries(row.levels ?? {}).map(([key, l]) => [
        key,
        {
          effective: l.effective,
          heldUntil: l.held_until === null ? null : new Date(l.held_until),
          reason: l.reason,
          movedAt: l.moved_at === null ? null : new Date(l.moved_at),
        },
      ]),
    ),
  };
}

/** The task that holds a lease of the queue now, or `null` (the lease ended, or is another queue's). */
async function leasedTask(db: Queryable, queue: string, leaseId: string): Promise<LeasedTask | null> {
  const rows = await db.query<TaskRow>(`select * from sluice.tasks where lease_id = $1 and queue = $2 and status = 'leased'`, [
    leaseId,
    queue,
  ]);
  const task = rows[0] ? toTask(rows[0]) : null;
  return task?.lease ? (task as LeasedTask) : null;
}

/** Who holds a lease of the queue now, or `null` (the lease ended, or is another queue's). */
export async function leaseHolder(db: Queryable, queue: string, leaseId: string): Promise<SlotHolder | null> {
  const task = await leasedTask(db, queue, leaseId);
  if (!task) return null;
  return {
    taskId: task.id,
    concurrencyKey: task.concurrencyKey,
    leaseId: task.lease.id,
    attempt: task.attempts,
    leasedAt: task.lease.leasedAt,
    expiresAt: task.lease.expiresAt,
  };
}

/**
 * An admin ends a lease: the task goes back to pending at once (cancelled, if that was asked)
 * and the attempt is given back. Compare-and-set on the lease id, like every ending, so the
 * old holder's later writes change nothing; the attempt's history records it.
 */
export async function leaseForceRelease(db: Queryable, queue: string, leaseId: string): Promise<string | null> {
  const task = await leasedTask(db, queue, leaseId);
  if (!task) return null;
  const held = await leasesTakeBack(db, [task], 'lease released by an admin');
  return held.has(task.id) ? task.id : null;
}
