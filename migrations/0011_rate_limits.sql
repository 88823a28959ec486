-- Rate limits (README "Rate limits"): at most `limit` pushes per `period_ms`, per queue and per
-- concurrency key, decided in the same claim as the concurrency limits.
--
-- Counted as a sliding window of grants: each task a claim leases under a rate limit leaves a
-- row per limited level, alive until its period has passed (`until`). A level has room for
-- `limit` minus its live grants. Since claims are serialised (the claim's lock) and every grant
-- is counted against the grants before it, no window of `period_ms` ever holds more than
-- `limit` claims — a sliding window, not a bucket that refills all at once. A retry, deferral
-- or release uses the rate again when it is pushed again (each push counts).

-- A task's rate for its key: like concurrency_limit, it sets the key's rate if none is set.
alter table sluice.tasks
  add column rate_limit integer,
  add column rate_period_ms integer,
  add constraint tasks_rate_complete check ((rate_limit is null) = (rate_period_ms is null)),
  add constraint tasks_rate_positive check (rate_limit is null or (rate_limit >= 1 and rate_period_ms >= 1));

-- The rate the first task of a lane gave.
alter table sluice.keys
  add column task_rate_limit integer,
  add column task_rate_period_ms integer;

-- Live grants. `lane` is a lane of the queue, or '*' for the queue as a whole.
create table sluice.rate_grants (
  queue   text not null,
  lane    text not null,
  granted timestamptz not null,
  until   timestamptz not null
);
-- Counting a level's live grants; the next time a grant ends (the dispatcher's next wake).
create index rate_grants_level on sluice.rate_grants (queue, lane, until);
create index rate_grants_until on sluice.rate_grants (until);
