-- Schedules (README "Schedules"): a cron expression in a time zone that enqueues a task at each
-- of its slots. A dispatcher fires a due schedule with one statement that moves `next_fire_at`
-- on, compare-and-set on the value it read, and inserts the task: a slot fires once however
-- many dispatchers race. The tasks' unique (schedule, schedule_slot) says the same in the schema.
create table sluice.schedules (
  name          text primary key,
  cron          text not null,
  timezone      text not null,
  overlap       text not null,
  -- The task each firing enqueues, every default resolved when the schedule was created: the
  -- input row of the enqueue (src/db/tasks.ts), without its timing fields (a firing runs at its
  -- slot; ttl_ms counts from the slot).
  template      jsonb not null,
  paused        boolean not null default false,
  -- The next slot to fire; null while paused, or when the expression has no slot left.
  next_fire_at  timestamptz,
  -- The last slot handled, and what happened to it: fired (last_task_id), or skipped because
  -- the previous firing's task was unfinished (overlap `skip`).
  last_slot_at  timestamptz,
  last_outcome  text,
  last_task_id  bigint,
  fired         bigint not null default 0,
  skipped       bigint not null default 0,
  -- Slots passed over by the catch-up rule (only the latest missed slot fires).
  missed        bigint not null default 0,
  created_at    timestamptz not null default now(),
  updated_at    timestamptz not null default now(),

  constraint schedules_overlap_known check (overlap in ('skip', 'queue', 'allow')),
  constraint schedules_outcome_known check (last_outcome in ('fired', 'skipped')),
  constraint schedules_last_whole check ((last_slot_at is null) = (last_outcome is null)),
  constraint schedules_paused_not_due check (not paused or next_fire_at is null),
  constraint schedules_counts_nonnegative check (fired >= 0 and skipped >= 0 and missed >= 0)
);
-- Dispatchers find due schedules by it, and the next-due probe reads the earliest slot.
create index schedules_due on sluice.schedules (next_fire_at) where next_fire_at is not null;

-- Which schedule and slot fired a task. Tasks outlive their schedule (no foreign key): deleting
-- a schedule leaves what it fired alone. The check and the index each read the tasks table once
-- while this migration holds it; the index holds scheduled tasks only.
alter table sluice.tasks
  add column schedule text,
  add column schedule_slot timestamptz,
  add constraint tasks_schedule_whole check ((schedule is null) = (schedule_slot is null));
create unique index tasks_schedule_slot on sluice.tasks (schedule, schedule_slot) where schedule is not null;
