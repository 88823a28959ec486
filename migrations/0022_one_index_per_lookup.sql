-- Each of the claim's lookups in the task table can use one index only, so that what it reads
-- does not depend on the statistics of the moment (0021 kept them from saying "no pages"; they
-- still say "no rows" after an autovacuum that found every task finished).
--
-- A generic plan made from "no rows" costs every index path alike, and small differences (an
-- index's height, a filter's cost) decide. Made so, the claim read every pending task's entry
-- of `tasks_lane_order` to find the tasks that came due (the index holds `run_at`), and again
-- to find the tasks it leases by id (the index ends with `id`); on the Worker it read a whole
-- queue's pending tasks through `tasks_queue_by_status` for each lane it served. A keyed pass
-- grew from a few ms to 30-48 ms until the next autovacuum (test/db/claim-plans.test.ts).
--
-- `tasks_lane_order` now also requires `lane is not null`: always true (lane is generated and
-- never null), but proved only by a statement that names a lane, as the claim's per-lane
-- steps do. The due probe, the promotion of delayed tasks, the expiry sweep and a lookup by id
-- no longer can read it whole.
-- `tasks_queue_by_status` (queue, status, id), for listing a queue's pending or waiting tasks
-- newest first, could serve every pending or waiting lookup of the claim too. Two indexes take
-- its place, one per status, whose predicates only a listing proves: it states the status as
-- `status is not distinct from '<status>'` (src/db/tasks.ts), which means `=` here (the status is
-- never null) but is not how the claim states it. They hold the entries the old index held.
create index tasks_lane_order_by_lane on sluice.tasks (queue, lane, priority, run_at, id)
  where status = 'pending' and lane is not null;
drop index sluice.tasks_lane_order;
alter index sluice.tasks_lane_order_by_lane rename to tasks_lane_order;
drop index sluice.tasks_queue_by_status;
create index tasks_pending_by_queue on sluice.tasks (queue, id) where status is not distinct from 'pending';
create index tasks_waiting_by_queue on sluice.tasks (queue, id) where status is not distinct from 'waiting';
