-- Live work in a small hot table, finished tasks in history partitions dropped whole
-- (docs/DESIGN.md §10). Until now a finished task stayed in sluice.tasks until retention
-- deleted it, at most 5,000 rows a minute: above 83 tasks/s the table grew without end, and every
-- finished row kept paying for the indexes the claim and the listing share.
--
--   * sluice.tasks holds pending, leased and waiting tasks only. A task that finishes leaves it
--     in the statement that finishes it (src/db/history.ts): deleted here, inserted into
--     sluice.finished with its attempts folded in. Its columns are ordered so that a claim,
--     which rewrites a row on its own page (fillfactor), logs only the bytes it changes: fixed
--     immutable columns first, then the ones a claim and a settle change, then the immutable
--     text (the common prefix and suffix of two versions of a row are left out of the WAL).
--   * sluice.finished is partitioned by `bucket`. The open bucket takes every finished task;
--     a sweep opens a new one every so often and drops buckets closed longer ago than the
--     retention window, a table at a time (migrations/functions/history.sql).
--   * sluice.attempts holds the ended attempts of live tasks only (a retry, a deferral, a
--     release, a wait); the attempt that finishes a task is on its finished row.
--   * sluice.all_tasks is what reads use: both tables, as the one table was.
--
-- Online: the finished rows are copied before anything is locked; only the last step (copy the
-- live rows and the rows finished meanwhile, swap the tables) holds sluice.tasks, for as long as
-- it takes to copy the live rows. The columns keep their names and types, so a dispatcher of the
-- previous version keeps working until it is replaced (the rows it finishes stay in the hot
-- table until the sweep moves them: tasks_stragglers).

create table sluice.history_buckets (
  bucket    bigint primary key,
  opened_at timestamptz not null,
  -- null while it is the open bucket (the highest).
  closed_at timestamptz,
  -- Tasks per queue and status in a closed bucket, counted once for /metrics; null = not yet.
  counts    jsonb
);

create table sluice.finished (
  -- Widest first: no padding between the columns.
  bucket              bigint not null,
  id                  bigint not null,
  -- Also when it was last updated: nothing changes a finished task.
  finished_at         timestamptz not null,
  created_at          timestamptz not null,
  run_at              timestamptz not null,
  expires_at          timestamptz,
  cancel_requested_at timestamptz,
  schedule_slot       timestamptz,
  -- The attempt that finished it, when a lease ended it (not for a task cancelled or expired
  -- while pending): it began at final_started_at, ended at finished_at with the task's status as
  -- its outcome; its lease is last_lease_id, its HTTP status last_status.
  final_started_at    timestamptz,
  parent_id           bigint,
  backoff_factor      double precision not null,
  backoff_jitter      double precision not null,
  priority            integer not null,
  attempts            integer not null,
  max_attempts        integer not null,
  deferrals           integer not null,
  resumes             integer not null,
  timeout_ms          integer not null,
  lease_ms            integer not null,
  backoff_initial_ms  integer not null,
  backoff_max_ms      integer not null,
  concurrency_limit   integer,
  rate_limit          integer,
  rate_period_ms      integer,
  last_status         integer,
  final_duration_ms   integer,
  last_lease_id       uuid,
  status              text not null,
  queue               text not null,
  concurrency_key     text,
  dedup_key           text,
  schedule            text,
  last_error          text,
  final_error         text,
  result              text,
  -- The attempts that ended before it, as sluice.attempts held them; null when none.
  attempt_log         jsonb,
  method              text not null,
  content_type        text,
  url                 text not null,
  headers             jsonb not null,
  body                text,
  constraint finished_status_final check (status in ('succeeded', 'dead', 'cancelled', 'expired'))
) partition by list (bucket);
-- Reads by id (a task, a repeated lease call), listing newest first (all, by queue, by a status
-- other than succeeded: dead letters), a task's children, a schedule's slots.
create index finished_id on sluice.finished (id);
create index finished_queue_id on sluice.finished (queue, id);
create index finished_status_id on sluice.finished (status, id) where status <> 'succeeded';
create index finished_parent on sluice.finished (parent_id) where parent_id is not null;
create index finished_schedule_slot on sluice.finished (schedule, schedule_slot) where schedule is not null;

insert into sluice.history_buckets (bucket, opened_at) values (1, now());
create table sluice.finished_1 partition of sluice.finished for values in (1);

-- Finished rows as the history keeps them: attempts folded in, the last one as the final attempt
-- when it ended the task (its lease is the task's last).
create function sluice.finished_from_legacy(p_after timestamptz, p_before timestamptz) returns void
language sql as $$
  insert into sluice.finished (bucket, id, queue, status, concurrency_key, priority, attempts, max_attempts, deferrals,
    resumes, finished_at, created_at, run_at, expires_at, cancel_requested_at, parent_id, schedule, schedule_slot,
    dedup_key, concurrency_limit, rate_limit, rate_period_ms, timeout_ms, lease_ms, last_lease_id, last_status, last_error, result,
    final_started_at, final_duration_ms, final_error, attempt_log, backoff_initial_ms, backoff_max_ms, backoff_factor,
    backoff_jitter, method, content_type, url, headers, body)
  select 1, t.id, t.queue, t.status, t.concurrency_key, t.priority, t.attempts, t.max_attempts, t.deferrals,
    t.resumes, t.finished_at, t.created_at, t.run_at, t.expires_at, t.cancel_requested_at, t.parent_id, t.schedule,
    t.schedule_slot, t.dedup_key, t.concurrency_limit, t.rate_limit, t.rate_period_ms, t.timeout_ms, t.lease_ms, t.last_lease_id,
    t.last_status, t.last_error, t.result, null, null, null,
    (select jsonb_agg(to_jsonb(a) - 'task_id' order by a.started_at, a.attempt) from sluice.attempts a where a.task_id = t.id),
    (t.backoff ->> 'initial_ms')::integer, (t.backoff ->> 'max_ms')::integer, (t.backoff ->> 'factor')::float8,
    (t.backoff ->> 'jitter')::float8, t.method, nullif(t.content_type, 'application/json'), t.url, t.headers, t.body
  from sluice.tasks t
  where t.status in ('succeeded', 'dead', 'cancelled', 'expired')
    and t.finished_at >= p_after and t.finished_at < p_before
$$;

-- 1. Unlocked: every row that finished more than a minute before this migration began. (A
--    transaction that finishes a task and commits after this statement began did so within
--    the last minute: step 3 takes it.)
select sluice.finished_from_legacy('-infinity', now() - interval '1 minute');

-- 2. The new hot table.
create table sluice.tasks_next (
  id                  bigint not null generated always as identity,
  created_at          timestamptz not null default now(),
  expires_at          timestamptz,
  schedule_slot       timestamptz,
  parent_id           bigint,
  priority            integer not null default 0,
  max_attempts        integer not null,
  timeout_ms          integer not null,
  lease_ms            integer not null,
  concurrency_limit   integer,
  rate_limit          integer,
  rate_period_ms      integer,
  -- The retry policy: 24 bytes, where the JSON it was made from took 97.
  backoff_initial_ms  integer not null,
  backoff_max_ms      integer not null,
  backoff_factor      double precision not null,
  backoff_jitter      double precision not null,
  -- What a settle changes.
  run_at              timestamptz not null default now(),
  cancel_requested_at timestamptz,
  finished_at         timestamptz,
  deferrals           integer not null default 0,
  resumes             integer not null default 0,
  last_status         integer,
  lent_queue          boolean not null default false,
  lent_key            boolean not null default false,
  last_lease_id       uuid,
  -- What a claim changes too, side by side.
  updated_at          timestamptz not null default now(),
  leased_at           timestamptz,
  lease_expires_at    timestamptz,
  attempts            integer not null default 0,
  lease_id            uuid,
  status              text not null default 'pending',
  result              text,
  last_error          text,
  waiting_on          bigint[],
  -- Immutable text last.
  queue               text not null,
  concurrency_key     text,
  lane                text generated always as (case when concurrency_key is null then '' else 'k:' || concurrency_key end) stored,
  dedup_key           text,
  schedule            text,
  method              text not null default 'POST',
  -- null: application/json, the default (17 bytes a task otherwise).
  content_type        text,
  url                 text not null,
  headers             jsonb not null default '{}',
  body                text
) with (fillfactor = 50);

-- 3. Locked: the live rows, the rows finished since step 1, the swap.
lock table sluice.tasks, sluice.attempts in access exclusive mode;
select sluice.finished_from_legacy(now() - interval '1 minute', 'infinity');
drop function sluice.finished_from_legacy(timestamptz, timestamptz);

insert into sluice.tasks_next (id, created_at, expires_at, schedule_slot, parent_id, priority, max_attempts, timeout_ms, lease_ms,
  concurrency_limit, rate_limit, rate_period_ms, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, run_at, updated_at, leased_at, lease_expires_at, cancel_requested_at, finished_at,
  attempts, deferrals, resumes, last_status, lent_queue, lent_key, lease_id, last_lease_id, status, result, last_error, waiting_on,
  queue, concurrency_key, dedup_key, schedule, method, content_type, url, headers, body)
overriding system value
select id, created_at, expires_at, schedule_slot, parent_id, priority, max_attempts, timeout_ms, lease_ms,
  concurrency_limit, rate_limit, rate_period_ms, (backoff ->> 'initial_ms')::integer, (backoff ->> 'max_ms')::integer,
  (backoff ->> 'factor')::float8, (backoff ->> 'jitter')::float8, run_at, updated_at, leased_at, lease_expires_at, cancel_requested_at, finished_at,
  attempts, deferrals, resumes, last_status, lent_queue, lent_key, lease_id, last_lease_id, status, result, last_error, waiting_on,
  queue, concurrency_key, dedup_key, schedule, method, nullif(content_type, 'application/json'), url, headers, body
from sluice.tasks
where status in ('pending', 'leased', 'waiting')
order by id;
select setval(pg_get_serial_sequence('sluice.tasks_next', 'id'), s.last_value, s.is_called) from sluice.tasks_id_seq s;

create table sluice.attempts_next (like sluice.attempts including defaults);
insert into sluice.attempts_next select a.* from sluice.attempts a where a.task_id in (select id from sluice.tasks_next);

-- The functions whose signatures name the old table's row type go with it; the migration runner
-- applies every function file again after this (migrations/functions/).
drop table sluice.attempts;
drop table sluice.tasks cascade;
-- keys_recompute takes the served lanes' marks too (claim.sql): the old signature would make
-- calls ambiguous.
drop function if exists sluice.keys_recompute(bigint[], timestamptz);
do $$ begin
  if to_regclass('sluice.functions') is not null then delete from sluice.functions; end if;
end $$;

alter table sluice.tasks_next rename to tasks;
alter sequence sluice.tasks_next_id_seq rename to tasks_id_seq;
alter table sluice.attempts_next rename to attempts;
alter table sluice.attempts add primary key (task_id, lease_id);

alter table sluice.tasks
  add constraint tasks_pkey primary key (id),
  -- Finished statuses stay allowed: a dispatcher of the previous version may still write them
  -- while it is being replaced (the sweep moves such rows: tasks_stragglers).
  add constraint tasks_status_known check (status in ('pending', 'leased', 'waiting', 'succeeded', 'dead', 'cancelled', 'expired')),
  add constraint tasks_lease_iff_leased check (
    (status = 'leased') = (lease_id is not null and leased_at is not null and lease_expires_at is not null)),
  add constraint tasks_lease_after_claim check (lease_expires_at is null or lease_expires_at > leased_at),
  add constraint tasks_finished_iff_final check ((status in ('succeeded', 'dead', 'cancelled', 'expired')) = (finished_at is not null)),
  add constraint tasks_attempts_bounded check (attempts >= 0 and attempts <= max_attempts),
  add constraint tasks_max_attempts_positive check (max_attempts >= 1),
  add constraint tasks_timeout_within_lease check (timeout_ms > 0 and timeout_ms < lease_ms),
  add constraint tasks_method_known check (method in ('POST', 'PUT', 'PATCH', 'DELETE', 'GET')),
  add constraint tasks_concurrency_limit_positive check (concurrency_limit is null or concurrency_limit >= 1),
  add constraint tasks_deferrals_nonnegative check (deferrals >= 0),
  add constraint tasks_rate_complete check ((rate_limit is null) = (rate_period_ms is null)),
  add constraint tasks_rate_positive check (rate_limit is null or (rate_limit >= 1 and rate_period_ms >= 1)),
  add constraint tasks_schedule_whole check ((schedule is null) = (schedule_slot is null));

-- Every index serves the claim, the lease calls or a state a healthy queue rarely enters; none
-- covers every row but the key (each costs an entry per claim and per settle that meets it).
create index tasks_lane_order on sluice.tasks (queue, lane, priority, run_at, id) where status = 'pending';
create index tasks_delayed on sluice.tasks (run_at) where status = 'pending' and run_at > created_at;
create index tasks_lane_leased on sluice.tasks (queue, lane, lease_expires_at) where status = 'leased';
create index tasks_waiting on sluice.tasks (queue, lane) where status = 'waiting';
create index tasks_pending_deadline on sluice.tasks (expires_at) where status = 'pending' and expires_at is not null;
create unique index tasks_dedup on sluice.tasks (queue, dedup_key)
  where dedup_key is not null and status in ('pending', 'leased', 'waiting');
create unique index tasks_schedule_slot on sluice.tasks (schedule, schedule_slot) where schedule is not null;
create index tasks_parent on sluice.tasks (parent_id) where parent_id is not null;
-- Listing live tasks: pending and waiting ones by queue and status (leased ones through
-- tasks_lane_leased).
create index tasks_queue_by_status on sluice.tasks (queue, status, id) where status in ('pending', 'waiting');
-- Finished rows written by a dispatcher of the previous version, for the sweep to move.
create index tasks_stragglers on sluice.tasks (id) where status not in ('pending', 'leased', 'waiting');

create trigger tasks_keys_on_insert after insert on sluice.tasks
  referencing new table as changed for each statement execute function sluice.keys_touch();

-- Reads see both tables as the one table was. A finished task has no lease.
create view sluice.all_tasks as
  select id, queue, status, url, method, headers, body, content_type, concurrency_key, concurrency_limit, priority, run_at,
         expires_at, attempts, max_attempts, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, deferrals, timeout_ms, lease_ms, dedup_key, lease_id, leased_at,
         lease_expires_at, cancel_requested_at, result, last_error, last_status, created_at, updated_at, finished_at, lane,
         last_lease_id, schedule, schedule_slot, rate_limit, rate_period_ms, parent_id, waiting_on, lent_queue, lent_key, resumes
  from sluice.tasks
  union all
  select id, queue, status, url, method, headers, body, content_type, concurrency_key, concurrency_limit, priority, run_at,
         expires_at, attempts, max_attempts, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, deferrals, timeout_ms, lease_ms, dedup_key, null::uuid, null::timestamptz,
         null::timestamptz, cancel_requested_at, result, last_error, last_status, created_at, finished_at, finished_at,
         case when concurrency_key is null then '' else 'k:' || concurrency_key end,
         last_lease_id, schedule, schedule_slot, rate_limit, rate_period_ms, parent_id, null::bigint[], false, false, resumes
  from sluice.finished;

-- Every ended attempt, as sluice.attempts held them all: a live task's there, a finished one's
-- folded into its row (the attempt that finished it in the final_* columns).
create view sluice.all_attempts as
  select task_id, attempt, lease_id, started_at, ended_at, outcome, http_status, duration_ms, error
  from sluice.attempts
  union all
  select f.id, a.attempt, a.lease_id, a.started_at, a.ended_at, a.outcome, a.http_status, a.duration_ms, a.error
  from sluice.finished f
  cross join lateral jsonb_to_recordset(f.attempt_log) as a(attempt integer, lease_id uuid, started_at timestamptz,
    ended_at timestamptz, outcome text, http_status integer, duration_ms integer, error text)
  where f.attempt_log is not null
  union all
  select f.id, f.attempts, f.last_lease_id, f.final_started_at, f.finished_at, f.status, f.last_status, f.final_duration_ms,
         f.final_error
  from sluice.finished f
  where f.final_started_at is not null;
