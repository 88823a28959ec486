/**
 * Debounce (migrations/0018_debounce.sql): an enqueue whose task names a debounce key joins the
 * task an earlier enqueue of that queue and key made, while it can be joined:
 * - trailing: while that task is still pending, it takes the new body (and headers) and comes
 *   due `periodMs` from now, never later than `maxWaitMs` after the first enqueue;
 * - leading: until `periodMs` after the first enqueue, the task (which ran at once) is returned
 *   and nothing is pushed.
 * Otherwise the task is enqueued, and later ones join it. Enqueues of one key are serialised by
 * a transaction-scoped lock on the key, so two racing enqueues never both make a task.
 */
import type { Queryable } from './db.ts';

export interface Debounce {
  key: string;
  periodMs: number;
  /** Trailing: never due later than this after the first enqueue (`null`: no cap). */
  maxWaitMs: number | null;
  mode: 'trailing' | 'leading';
}

/** What of a debounced task an enqueue that joins it brings (a trailing join takes its body and headers). */
export interface DebouncedTask {
  queue: string;
  body: string | null;
  headers: Record<string, string>;
  contentType: string;
  debounce: Debounce;
}

/** What became of one debounced enqueue: the id of the task it joined, or `null` (enqueue it). */
export async function debounceJoin(q: Queryable, task: DebouncedTask): Promise<string | null> {
  const { key, periodMs, mode } = task.debounce;
  await q.query(`select pg_advisory_xact_lock(hashtextextended('sluice.debounce ' || $1 || ' ' || $2, 0))`, [task.queue, key]);
  if (mode === 'leading') {
    const rows = await q.query<{ id: string }>(
      `select task_id::text as id from sluice.debounces where queue = $1 and key = $2 and mode = 'leading' and until > now()`,
      [task.queue, key],
    );
    return rows[0]?.id ?? null;
  }
  // Trailing: the pending task takes the new body and its due time moves on, up to the cap.
  const rows = await q.query<{ id: string }>(
    `update sluice.tasks t
     set body = $3, headers = $4::jsonb, content_type = $5,
         run_at = least(now() + make_interval(secs => $6::float8 / 1000), d.until), updated_at = now()
     from sluice.debounces d
     where d.queue = $1 and d.key = $2 and d.mode = 'trailing' and t.id = d.task_id and t.status = 'pending'
     returning t.id::text as id`,
    [task.queue, key, task.body, JSON.stringify(task.headers), task.contentType, periodMs],
  );
  return rows[0]?.id ?? null;
}

/** Records the task a debounced enqueue made as the one later enqueues of its key join. */
export async function debounceRecord(q: Queryable, task: DebouncedTask, taskId: string): Promise<void> {
  const { key, periodMs, maxWaitMs, mode } = task.debounce;
  // Leading: joined until the period is over. Trailing: capped at max_wait_ms after the first.
  const windowMs = mode === 'leading' ? periodMs : maxWaitMs;
  await q.query(
    `insert into sluice.debounces (queue, key, task_id, mode, first_at, until)
     values ($1, $2, $3, $4, now(), case when $5::float8 is null then 'infinity'::timestamptz else now() + make_interval(secs => $5::float8 / 1000) end)
     on conflict (queue, key) do update
       set task_id = excluded.task_id, mode = excluded.mode, first_at = excluded.first_at, until = excluded.until`,
    [task.queue, key, taskId, mode, windowMs],
  );
}

/** Deletes the rows nothing can join any more (their task ran, or their period ended); returns how many. */
export async function debouncesSweep(q: Queryable): Promise<number> {
  const [row] = await q.query<{ n: number }>(
    `with gone as (
       delete from sluice.debounces d
       where (d.mode = 'leading' and d.until < now())
          or (d.mode = 'trailing' and not exists (select 1 from sluice.tasks t where t.id = d.task_id and t.status = 'pending'))
       returning 1
     ) select count(*)::int as n from gone`,
  );
  return row?.n ?? 0;
}
