-- Fewer index entries per claim and per settle (issue: engine speed; see 0006 for why every
-- index whose predicate a new row version meets costs on each step):
--   * lease calls find their task by the id their lease token names, so lease ids, current or
--     ended, need no index of their own (an admin's release scans the queue's leased rows);
--   * listing a queue's tasks by status keeps an index for the statuses a healthy queue rarely
--     enters, as listing by status does; a queue's succeeded and leased tasks are found by a
--     walk down the primary key, newest first;
--   * retention deletes the oldest finished tasks in id order (src/db/retention.ts), not by
--     an index of finish times.
drop index sluice.tasks_lease_id;
drop index sluice.tasks_last_lease_id;
drop index sluice.tasks_queue_id;
create index tasks_queue_by_status on sluice.tasks (queue, status, id) where status not in ('leased', 'succeeded');
drop index sluice.tasks_finished;
