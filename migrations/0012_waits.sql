-- Waits on child tasks (README "Waits"): a task holding a lease may wait for tasks it enqueued
-- (its children, `parent_id`). Its lease ends, it becomes `waiting`, and once every child it
-- waits on has finished, a claim pass makes it pending again and it is pushed again (a resume,
-- not a retry: the attempt is given back).
--
-- While waiting it holds no cluster slot. It holds its queue's and its key's slots, except
-- where it lends them to children on its own queue (and key), at most the level's limit lent
-- at once: `lent_queue`, `lent_key`. The claim counts a waiting task at a level unless it lent
-- that level's slot (migrations/functions/claim.sql); the wait itself is decided by
-- sluice.lease_wait (migrations/functions/waits.sql).
alter table sluice.tasks drop constraint tasks_status_known;
alter table sluice.tasks
  add constraint tasks_status_known check (status in ('pending', 'leased', 'waiting', 'succeeded', 'dead', 'cancelled', 'expired')),
  add column parent_id bigint references sluice.tasks (id) on delete set null,
  -- The children waited on; null while waiting = all of them.
  add column waiting_on bigint[],
  add column lent_queue boolean not null default false,
  add column lent_key boolean not null default false,
  -- How many times it waited (its pushes after a wait say so: Sluice-Resume).
  add column resumes integer not null default 0;

create index tasks_parent on sluice.tasks (parent_id) where parent_id is not null;
-- Waiting tasks per lane: counted by the claim like leased ones, and found by its resume step.
create index tasks_waiting on sluice.tasks (queue, lane) where status = 'waiting';

-- A waiting task is unfinished: it keeps its dedup key (src/db/tasks.ts matches this predicate).
drop index sluice.tasks_dedup;
create unique index tasks_dedup on sluice.tasks (queue, dedup_key)
  where dedup_key is not null and status in ('pending', 'leased', 'waiting');
