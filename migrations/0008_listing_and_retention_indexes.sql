-- Two indexes 0007 dropped come back, since their queries must not walk the whole table:
--   * retention finds the oldest finished tasks by their finish time (without it, a sweep that
--     finds fewer than a batch had read every retained row, once a minute);
--   * listing a queue's tasks, newest first, whatever their status (a dashboard's first view);
--     without it a small queue in a large table was a walk down all of it.
-- Each costs one entry per task version that meets it: the first at finish only, the second on
-- every claim and settle (measured: no difference in engine throughput beyond the runs' noise,
-- and about 15% more WAL per task).
create index tasks_finished on sluice.tasks (finished_at) where finished_at is not null;
create index tasks_queue_id on sluice.tasks (queue, id);
