-- `sluice.keys` holds lanes, not keys: a queue's lane '' (its tasks without a concurrency key)
-- and a lane 'k:<key>' per key, each with the claim's hint and round-robin mark; keys' own
-- run-time limits are `sluice.key_limits`. The table, its indexes and constraints, and the
-- functions that keep it are named for what they hold.
--
-- The functions come back under their new names from migrations/functions/claim.sql, applied
-- in this same run: `lanes_touch` with its trigger `tasks_lanes_on_insert`, `lanes_recompute`,
-- and `claim`, which calls them.
--
-- A server of the previous version may still run while this one starts (migrate first, then
-- replace the servers): it reads and updates lanes as `sluice.keys`, so a view of that name
-- stays (a simple view: its updates reach the table) until a later migration drops it.
alter table sluice.keys rename to lanes;
alter sequence sluice.keys_id_seq rename to lanes_id_seq;
alter index sluice.keys_walk rename to lanes_walk;
-- keys_pkey, keys_queue_lane_key (their indexes follow), keys_task_limit_positive, and on
-- PostgreSQL 18 the named not-null constraints.
do $$
declare
  c record;
begin
  for c in select conname from pg_constraint where conrelid = 'sluice.lanes'::regclass and conname like 'keys\_%' loop
    execute format('alter table sluice.lanes rename constraint %I to %I', c.conname, 'lanes_' || substr(c.conname, 6));
  end loop;
end $$;

drop trigger if exists tasks_keys_on_insert on sluice.tasks;
drop function if exists sluice.keys_touch();
drop function if exists sluice.keys_recompute(bigint[], timestamptz, bigint[], bigint);

create view sluice.keys as select * from sluice.lanes;
