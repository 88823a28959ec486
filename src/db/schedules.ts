/**
 * Schedule rows (docs/guide.md "Schedules"): create, read, list, pause, resume, delete, and the two
 * statements of a firing: finding due schedules, and firing one, exactly once per slot.
 */
import { ConflictError } from '../core/errors.ts';
import type { Overlap } from '../core/schedule.ts';
import type { Queryable } from './db.ts';
import { type NewTask, type TaskInputRow, toInputRow } from './new-task.ts';
import { inQueueScope } from './queue-scope.ts';
import { DEFAULT_CONTENT_TYPE } from './rows.ts';

/** The task a firing enqueues: the enqueue's input row, every default resolved, no timing fields. */
export type TaskTemplate = Omit<TaskInputRow, 'ord' | 'run_at' | 'delay_ms' | 'expires_at' | 'dedup_key' | 'dedup_ttl_ms'>;

/** A resolved task as a schedule keeps it: its timing and dedup fields are the firing's own. */
export function toTemplate(task: NewTask): TaskTemplate {
  const { ord, run_at, delay_ms, expires_at, dedup_key, dedup_ttl_ms, ...template } = toInputRow(task, 0);
  return template;
}

export interface NewSchedule {
  name: string;
  cron: string;
  timezone: string;
  overlap: Overlap;
  template: TaskTemplate;
  /** The next slot to fire; `null` while paused (a new schedule: created paused), or when the expression has no slot left. */
  nextFireAt: Date | null;
}

export interface Schedule extends NewSchedule {
  paused: boolean;
  lastSlotAt: Date | null;
  lastOutcome: 'fired' | 'skipped' | null;
  lastTaskId: string | null;
  fired: number;
  skipped: number;
  missed: number;
  createdAt: Date;
  updatedAt: Date;
}

interface ScheduleRow {
  name: string;
  cron: string;
  timezone: string;
  overlap: Overlap;
  template: TaskTemplate;
  paused: boolean;
  next_fire_at: Date | null;
  last_slot_at: Date | null;
  last_outcome: 'fired' | 'skipped' | null;
  last_task_id: string | null;
  fired: string;
  skipped: string;
  missed: string;
  created_at: Date;
  updated_at: Date;
}

function toSchedule(row: ScheduleRow): Schedule {
  return {
    name: row.name,
    cron: row.cron,
    timezone: row.timezone,
    overlap: row.overlap,
    template: row.template,
    paused: row.paused,
    nextFireAt: row.next_fire_at,
    lastSlotAt: row.last_slot_at,
    lastOutcome: row.last_outcome,
    lastTaskId: row.last_task_id === null ? null : String(row.last_task_id),
    fired: Number(row.fired),
    skipped: Number(row.skipped),
    missed: Number(row.missed),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/**
 * Overlap `queue` runs the firings one at a time on their key, `schedule:<name>`, limit 1. The
 * 1 is written as the key's run-time override (sluice.key_limits), which wins over the limit a
 * task gives: otherwise whoever enqueued onto that key first, with any concurrency_limit, would
 * set its limit for good (the first task's limit sticks). Refusing `schedule:` keys at enqueue
 * instead would not cover a key a queue's key_from derives from a body, and would refuse keys
 * callers use today. Creating the schedule sets the override to 1; each firing writes it again
 * if it is missing (an admin removed it), and leaves an admin's own value alone.
 */
const KEY_OVERRIDE_INSERT = `insert into sluice.key_limits (queue, concurrency_key, "limit")`;

/** Creates a schedule; a taken name is a conflict (409 `schedule_exists`). */
export async function scheduleInsert(db: Queryable, s: NewSchedule): Promise<Schedule> {
  try {
    const [row] = await db.query<ScheduleRow>(
      `with created as (
         insert into sluice.schedules (name, cron, timezone, overlap, template, paused, next_fire_at)
         values ($1, $2, $3, $4, $5::jsonb, $6::timestamptz is null, $6)
         returning *
       ),
       guarded as (
         ${KEY_OVERRIDE_INSERT}
         select c.template->>'queue', c.template->>'concurrency_key', 1 from created c
         where c.overlap = 'queue' and c.template->>'concurrency_key' is not null
         on conflict (queue, concurrency_key) do update set "limit" = 1, updated_at = now()
       )
       select * from created`,
      [s.name, s.cron, s.timezone, s.overlap, JSON.stringify(s.template), s.nextFireAt],
    );
    return toSchedule(row!);
  } catch (error) {
    if ((error as { code?: string }).code === '23505') {
      throw new ConflictError(409, 'schedule_exists', `a schedule named ${s.name} exists already: delete it first, or choose another name`);
    }
    throw error;
  }
}

/**
 * The database's clock. Slots are reckoned on it, as due times are: a first slot taken from the
 * API process's clock would fire early or late by the difference between the two.
 */
export async function databaseNow(db: Queryable): Promise<Date> {
  const [row] = await db.query<{ now: Date }>('select clock_timestamp() as now');
  return new Date(row!.now);
}

export async function scheduleGet(db: Queryable, name: string): Promise<Schedule | null> {
  const [row] = await db.query<ScheduleRow>('select * from sluice.schedules where name = $1', [name]);
  return row ? toSchedule(row) : null;
}

/** By name, after `afterName` when given; with `queues`, only those whose task is for a queue its patterns admit (db/queue-scope.ts). */
export async function scheduleList(
  db: Queryable,
  options: { afterName?: string | undefined; limit: number; queues?: readonly string[] | null },
): Promise<Schedule[]> {
  const rows = await db.query<ScheduleRow>(
    `select * from sluice.schedules where ($1::text is null or name > $1) and ${inQueueScope("template->>'queue'", '$3')}
     order by name limit $2`,
    [options.afterName ?? null, options.limit, options.queues ?? null],
  );
  return rows.map(toSchedule);
}

/** Pauses a schedule: no slot fires until it is resumed. `null` when there is none. */
export async function schedulePause(db: Queryable, name: string): Promise<Schedule | null> {
  const [row] = await db.query<ScheduleRow>(
    `update sluice.schedules set paused = true, next_fire_at = null,
       updated_at = case when paused then updated_at else now() end
     where name = $1 returning *`,
    [name],
  );
  return row ? toSchedule(row) : null;
}

/**
 * Resumes a paused schedule at `next`, the first slot after now: slots that passed while it was
 * paused never fire. A schedule that is not paused is left as it is. `null` when there is none.
 */
export async function scheduleResume(db: Queryable, name: string, next: Date | null): Promise<Schedule | null> {
  const [row] = await db.query<ScheduleRow>(
    `update sluice.schedules
     set next_fire_at = case when paused then $2::timestamptz else next_fire_at end,
         updated_at = case when paused then now() else updated_at end,
         paused = false
     where name = $1 returning *`,
    [name, next],
  );
  return row ? toSchedule(row) : null;
}

/** Deletes a schedule; the tasks it fired are left alone. False when there is none. */
export async function scheduleDelete(db: Queryable, name: string): Promise<boolean> {
  const rows = await db.query('delete from sluice.schedules where name = $1 returning 1', [name]);
  return rows.length > 0;
}

export interface DueSchedule {
  name: string;
  cron: string;
  timezone: string;
  nextFireAt: Date;
  /** The clock the schedule was found due by. */
  now: Date;
}

/** Schedules whose next slot has come by `now` (default: the database's clock), earliest first. */
export async function schedulesDue(db: Queryable, options: { now?: Date | undefined; limit: number }): Promise<DueSchedule[]> {
  const rows = await db.query<{ name: string; cron: string; timezone: string; next_fire_at: Date; now: Date }>(
    `with clock as (select coalesce($1::timestamptz, clock_timestamp()) as now)
     select s.name, s.cron, s.timezone, s.next_fire_at, clock.now
     from sluice.schedules s, clock
     where s.next_fire_at <= clock.now
     order by s.next_fire_at
     limit $2`,
    [options.now ?? null, options.limit],
  );
  return rows.map((r) => ({ name: r.name, cron: r.cron, timezone: r.timezone, nextFireAt: r.next_fire_at, now: r.now }));
}

// One statement: the schedule row is taken only while its next slot is still the one read
// (compare-and-set; a racing dispatcher that fired it already, or holds it now, leaves 0 rows),
// the task inserted with an id of its own, and the row moved on to the next slot. With overlap
// `skip`, an unfinished task of the previous firing makes the slot a skip instead. The row is
// updated from what the insert returned: a slot whose task exists already (a schedule of the
// same name, deleted and made again, fired it) is passed over without counting as fired. With
// overlap `queue`, the key's override of 1 is written again if it is missing (KEY_OVERRIDE_INSERT).
const FIRE = `
with s as (
  select s.name, s.template, s.overlap, $3::timestamptz as slot, nextval(pg_get_serial_sequence('sluice.tasks', 'id')) as new_id,
         s.overlap <> 'skip' or not exists (
           select 1 from sluice.tasks t
           where t.id = s.last_task_id and t.status not in ('succeeded', 'dead', 'cancelled', 'expired')
         ) as fires
  from sluice.schedules s
  where s.name = $1 and s.next_fire_at = $2
  for update skip locked
),
inserted as (
  insert into sluice.tasks (id, queue, url, method, headers, body, content_type, concurrency_key, concurrency_limit,
    rate_limit, rate_period_ms, priority, run_at, expires_at, max_attempts, backoff_initial_ms, backoff_max_ms, backoff_factor,
    backoff_jitter, timeout_ms, lease_ms, schedule, schedule_slot, callback)
  overriding system value
  select s.new_id, x.queue, x.url, x.method, x.headers, x.body, nullif(x.content_type, '${DEFAULT_CONTENT_TYPE}'), x.concurrency_key,
    x.concurrency_limit,
    x.rate_limit, x.rate_period_ms, x.priority, s.slot, s.slot + make_interval(secs => x.ttl_ms / 1000.0), x.max_attempts,
    (x.backoff ->> 'initial_ms')::integer, (x.backoff ->> 'max_ms')::integer, (x.backoff ->> 'factor')::float8,
    (x.backoff ->> 'jitter')::float8, x.timeout_ms, x.lease_ms, s.name, s.slot, x.callback
  from s,
    jsonb_to_record(s.template) as x(queue text, url text, method text, headers jsonb, body text, content_type text,
      concurrency_key text, concurrency_limit integer, rate_limit integer, rate_period_ms integer, priority integer, ttl_ms bigint,
      max_attempts integer, backoff jsonb, timeout_ms integer, lease_ms integer, callback jsonb)
  -- A slot fired once already: its task is live (the conflict below) or finished.
  where s.fires and not exists (select 1 from sluice.finished f where f.schedule = s.name and f.schedule_slot = s.slot)
  on conflict (schedule, schedule_slot) where schedule is not null do nothing
  returning id, run_at, queue, concurrency_key
),
guarded as (
  ${KEY_OVERRIDE_INSERT}
  select i.queue, i.concurrency_key, 1 from inserted i, s
  where s.overlap = 'queue' and i.concurrency_key is not null
  on conflict (queue, concurrency_key) do nothing
),
advanced as (
  update sluice.schedules x
  set next_fire_at = $4, missed = x.missed + $5, updated_at = now(),
      last_slot_at = case when o.landed or not s.fires then s.slot else x.last_slot_at end,
      last_outcome = case when o.landed then 'fired' when not s.fires then 'skipped' else x.last_outcome end,
      last_task_id = case when o.landed then s.new_id else x.last_task_id end,
      fired = x.fired + o.landed::int, skipped = x.skipped + (not s.fires)::int
  from s, lateral (select exists (select 1 from inserted) as landed) o
  where x.name = s.name
  returning s.fires
)
select a.fires, i.id::text as task_id, i.run_at from advanced a left join inserted i on true`;

export interface FireInput {
  name: string;
  /** The next slot as read: the firing happens only while it is still the schedule's. */
  expected: Date;
  slot: Date;
  next: Date | null;
  /** Older slots passed over by the catch-up rule. */
  missed: number;
}

/**
 * Fires one slot of a schedule. `fired`: the task was enqueued (its id and run_at); `skipped`:
 * the previous firing's task was unfinished (overlap `skip`); `lost`: another dispatcher fired
 * this slot, or the schedule was paused or deleted meanwhile.
 */
export async function scheduleFire(
  db: Queryable,
  f: FireInput,
): Promise<{ outcome: 'fired'; taskId: string; runAt: Date } | { outcome: 'skipped' | 'lost' }> {
  const [row] = await db.query<{ fires: boolean; task_id: string | null; run_at: Date | null }>(FIRE, [
    f.name,
    f.expected,
    f.slot,
    f.next,
    f.missed,
  ]);
  if (!row) return { outcome: 'lost' };
  if (!row.fires) return { outcome: 'skipped' };
  // The slot's task existed already (a schedule of the same name, deleted and made again).
  if (row.task_id === null || row.run_at === null) return { outcome: 'lost' };
  return { outcome: 'fired', taskId: row.task_id, runAt: row.run_at };
}
