-- Sluice's first schema: tasks, queues, and the claim function.
-- The state list here must match TASK_STATUSES in src/core/types.ts.

create schema if not exists sluice;

create table sluice.tasks (
  id                  bigint generated always as identity primary key,
  queue               text not null,
  status              text not null default 'pending',
  url                 text not null,
  method              text not null default 'POST',
  headers             jsonb not null default '{}',
  body                text,
  content_type        text not null default 'application/json',
  concurrency_key     text,
  concurrency_limit   integer,
  priority            integer not null default 0,
  run_at              timestamptz not null default now(),
  expires_at          timestamptz,
  attempts            integer not null default 0,
  max_attempts        integer not null,
  backoff             jsonb not null,
  deferrals           integer not null default 0,
  timeout_ms          integer not null,
  lease_ms            integer not null,
  dedup_key           text,
  lease_id            uuid,
  leased_at           timestamptz,
  lease_expires_at    timestamptz,
  cancel_requested_at timestamptz,
  result              text,
  last_error          text,
  last_status         integer,
  created_at          timestamptz not null default now(),
  updated_at          timestamptz not null default now(),
  finished_at         timestamptz,

  constraint tasks_status_known check (status in ('pending', 'leased', 'succeeded', 'dead', 'cancelled', 'expired')),
  -- A task is leased exactly when it carries a whole lease.
  constraint tasks_lease_iff_leased check (
    (status = 'leased') = (lease_id is not null and leased_at is not null and lease_expires_at is not null)
  ),
  constraint tasks_lease_after_claim check (lease_expires_at is null or lease_expires_at > leased_at),
  -- Finished tasks carry their finishing time; live ones do not.
  constraint tasks_finished_iff_final check (
    (status in ('succeeded', 'dead', 'cancelled', 'expired')) = (finished_at is not null)
  ),
  constraint tasks_attempts_bounded check (attempts >= 0 and attempts <= max_attempts),
  constraint tasks_max_attempts_positive check (max_attempts >= 1),
  constraint tasks_timeout_within_lease check (timeout_ms > 0 and timeout_ms < lease_ms),
  constraint tasks_method_known check (method in ('POST', 'PUT', 'PATCH', 'DELETE', 'GET')),
  constraint tasks_concurrency_limit_positive check (concurrency_limit is null or concurrency_limit >= 1),
  constraint tasks_deferrals_nonnegative check (deferrals >= 0)
);

-- The claim walks ready tasks in (priority, run_at, id) order.
create index tasks_ready on sluice.tasks (priority, run_at, id) where status = 'pending';
-- The reaper finds expired leases; limits count leased rows.
create index tasks_leased on sluice.tasks (lease_expires_at) where status = 'leased';
-- The reaper expires pending tasks past their deadline (ttl).
create index tasks_pending_deadline on sluice.tasks (expires_at) where status = 'pending' and expires_at is not null;
-- Idempotent enqueue: one unfinished task per (queue, dedup_key).
create unique index tasks_dedup on sluice.tasks (queue, dedup_key)
  where dedup_key is not null and status in ('pending', 'leased');
-- Listing: newest first, optionally by queue or status.
create index tasks_queue_id on sluice.tasks (queue, id);
create index tasks_status_id on sluice.tasks (status, id);

-- Run-time queue settings that win over the environment's (SLUICE_QUEUES) until removed.
create table sluice.queues (
  name       text primary key,
  options    jsonb not null default '{}',
  paused     boolean not null default false,
  updated_at timestamptz not null default now()
);

-- One claim pass: lease up to p_max ready tasks, best first, skipping rows another
-- dispatcher holds. A claim counts the attempt it starts.
create function sluice.claim(p_max integer) returns setof sluice.tasks
language sql volatile as $$
  with picked as (
    select id from sluice.tasks
    where status = 'pending'
      and run_at <= now()
      and (expires_at is null or expires_at > now())
    order by priority, run_at, id
    limit p_max
    for update skip locked
  )
  update sluice.tasks t
  set status = 'leased',
      lease_id = gen_random_uuid(),
      leased_at = now(),
      lease_expires_at = now() + make_interval(secs => t.lease_ms / 1000.0),
      attempts = t.attempts + 1,
      updated_at = now()
  from picked
  where t.id = picked.id
  returning t.*;
$$;
