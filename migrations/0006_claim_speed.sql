-- Claim and settle at speed (issue: engine speed). Until now a statement-level trigger ran after
-- every update of sluice.tasks, capturing every claimed and every settled row to keep the lanes'
-- hints (0002) from being too poor. Updates no longer need it:
--   * a task made pending again (retry, deferral, release, redrive) is never due before the
--     statement that makes it so (settle writes greatest(run_at, now())), so it is later than
--     its created_at and the next claim pass promotes it (claim.sql);
--   * a pending task cancelled or expired leaves a hint too good, which is safe: the claim that
--     finds the lane empty makes its hint exact.
-- Inserts keep their trigger: an enqueued task due at once lowers its lane's hint as it lands.
drop trigger tasks_keys_on_update on sluice.tasks;

-- Every claim and every settle writes a new version of the task row, and with it an entry in
-- every index whose predicate the new version meets. Indexes over all rows cost on every step;
-- the partial ones only where a task enters their status. So:
--   * listing by status (newest first) keeps an index only for the statuses a healthy queue
--     rarely enters: leased tasks are few (a scan of tasks_lane_leased finds them), and
--     succeeded ones are most of the newest rows (a walk down the primary key finds them);
--   * one index of leased rows serves both the claim's per-lane counts and the reaper's and
--     the next-due probe's earliest expiry (leased rows are bounded by the limits).
drop index sluice.tasks_status_id;
create index tasks_by_status on sluice.tasks (status, id) where status not in ('leased', 'succeeded');
drop index sluice.tasks_leased;
drop index sluice.tasks_lane_leased;
create index tasks_lane_leased on sluice.tasks (queue, lane, lease_expires_at) where status = 'leased';
