-- Leases held past the push (DESIGN.md §4): the lease that last ended each task, so that a
-- repeated `complete` is recognised; and every attempt's outcome, for dead letters.

alter table sluice.tasks add column last_lease_id uuid;
create index tasks_last_lease_id on sluice.tasks (last_lease_id) where last_lease_id is not null;

create table sluice.attempts (
  task_id     bigint not null references sluice.tasks (id) on delete cascade,
  attempt     integer not null,
  lease_id    uuid not null,
  started_at  timestamptz not null,
  ended_at    timestamptz not null default now(),
  -- succeeded | retry | deferred | released | dead | cancelled
  outcome     text not null,
  http_status integer,
  duration_ms integer,
  error       text,
  primary key (task_id, lease_id)
);
