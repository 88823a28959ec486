-- The history's buckets (0014_history.sql): one statement a sweep, however many dispatchers run.
--
-- sluice.history_sweep(p_width_ms, p_keep_ms): when the open bucket has been open for p_width_ms
-- and holds a task, opens the next one (a new table attached as a partition: no lock that stops a read or an
-- insert); then drops the buckets closed more than p_keep_ms ago, oldest first, a table at a
-- time (p_keep_ms null: none). A finished task is therefore gone at most p_width_ms (plus the time to the next sweep)
-- after it is p_keep_ms old, and removing a day of history costs as much as removing a minute.
--
-- Dropping a partition takes its parent's strongest lock: for at most lock_timeout (1 s), waiting
-- behind the statements that read or write finished tasks at that moment (each a few ms), and
-- blocking those that come after it. A drop that cannot get it in time waits for the next sweep.
-- p_now: the sweep's clock, default the database's (tests move time).
-- Returns {"opened": bucket or null, "dropped": [buckets]}.
create or replace function sluice.history_sweep(p_width_ms bigint, p_keep_ms bigint, p_now timestamptz default null) returns jsonb
language plpgsql volatile set lock_timeout = '1s' as $$
declare
  v_open sluice.history_buckets;
  v_next bigint;
  v_dropped bigint[] := '{}';
  v_bucket bigint;
  v_now timestamptz := coalesce(p_now, clock_timestamp());
begin
  -- One sweeper at a time; the others find nothing to do (the lock's id: src/db/locks.ts).
  if not pg_try_advisory_xact_lock(7215530004) then
    return jsonb_build_object('opened', null, 'dropped', '[]'::jsonb);
  end if;
  select * into v_open from sluice.history_buckets order by bucket desc limit 1;
  -- An empty bucket stays open however old: an idle system makes no tables.
  if v_open.opened_at <= v_now - make_interval(secs => p_width_ms / 1000.0)
     and exists (select 1 from sluice.finished where bucket = v_open.bucket) then
    v_next := v_open.bucket + 1;
    execute format('create table sluice.%I (like sluice.finished including defaults including constraints)', 'finished_' || v_next);
    execute format('alter table sluice.finished attach partition sluice.%I for values in (%s)', 'finished_' || v_next, v_next);
    update sluice.history_buckets set closed_at = v_now where bucket = v_open.bucket;
    insert into sluice.history_buckets (bucket, opened_at) values (v_next, v_now);
  end if;

  for v_bucket in
    select bucket from sluice.history_buckets
    where p_keep_ms is not null and closed_at is not null
      and closed_at <= v_now - make_interval(secs => p_keep_ms / 1000.0)
    order by bucket
  loop
    begin
      execute format('drop table if exists sluice.%I', 'finished_' || v_bucket);
      delete from sluice.history_buckets where bucket = v_bucket;
      v_dropped := v_dropped || v_bucket;
    exception when lock_not_available then
      exit;
    end;
  end loop;
  return jsonb_build_object('opened', v_next, 'dropped', to_jsonb(v_dropped));
end $$;
