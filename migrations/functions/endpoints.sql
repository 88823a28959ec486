-- What pushes' answers teach their origins (0027_endpoints.sql), and the resume that lets an
-- origin's parked tasks go. This file is their one home.

-- How long a paused origin waits before its next probe: 5 s after the pause, doubling with each
-- probe that fails, never more than 5 minutes.
create or replace function sluice.endpoint_probe_delay(p_pauses integer) returns interval
language sql immutable as $$
  select make_interval(secs => least(300, 5 * power(2, least(p_pauses, 16))))
$$;

-- Makes the tasks parked behind an origin due now (one probe of tasks_origin_held per origin)
-- and returns how many. The claim pass that finds them due promotes them (0006_claim_speed.sql).
create or replace function sluice.endpoints_release(p_origins text[]) returns integer
language plpgsql volatile as $$
declare
  v_n integer;
begin
  update sluice.tasks t set run_at = now(), held = false, updated_at = now()
  where t.held and sluice.url_origin(t.url) = any(p_origins) and t.status = 'pending';
  get diagnostics v_n = row_count;
  return v_n;
end $$;

-- Called by the settle statement (src/db/settle.ts) with the pushes whose endings it wrote, and by
-- an unanswered push's note (src/db/levels.ts). p_items: [{n (its order), id (the task), origin,
-- health ('ok': 2xx; 'fail': no connection, a timeout, a 5xx; 'hold': a Retry-After, with
-- wait_ms; 'other': any other answer, which says nothing of the origin's health), wait_ms,
-- error}]. p_pause_after: consecutive failures that pause an origin (0: never).
-- One row per origin, locked in origin order, as every writer of them locks them.
-- - A failure counts a failure in its minute (attempts are counted by the dispatchers' meters),
--   notes its error, and lengthens the run of failures; a 2xx ends the run (a failure after it in
--   the batch, `n` greater, starts a new one). The settle passes a 2xx only for an origin that
--   has something to end (a run of failures, a pause, a probe): a healthy origin's pushes cost
--   their settles nothing here.
-- - A run of p_pause_after pauses the origin until its first probe. A failure of the probe out
--   (`probe_task`) sets the next one further off; a 2xx resumes an origin paused by failures and
--   makes its parked tasks due (an origin paused by hand stays so).
-- - A Retry-After holds the origin until then.
-- Returns how many parked tasks became due.
create or replace function sluice.endpoints_learn(p_items jsonb, p_pause_after integer) returns integer
language plpgsql volatile as $$
declare
  v_resumed text[];
begin
  insert into sluice.endpoints (origin)
  select distinct s.origin from jsonb_to_recordset(p_items) as s(origin text) where s.origin is not null order by 1
  on conflict (origin) do nothing;

  -- Locked by a statement of its own, so that the next one's snapshot, taken once the locks are
  -- held, reads each row as the last writer left it.
  perform 1 from sluice.endpoints e
  where e.origin = any(array(select distinct s.origin from jsonb_to_recordset(p_items) as s(origin text)))
  order by e.origin
  for update;

  with input as (
    select s.* from jsonb_to_recordset(p_items) as s(n integer, id bigint, origin text, health text, wait_ms double precision, error text)
    where s.origin is not null
  ),
  locked as (
    select e.origin, e.probe_task from sluice.endpoints e
    where e.origin = any(array(select distinct origin from input))
  ),
  last_ok as (
    select origin, max(n) filter (where health = 'ok') as n from input group by origin
  ),
  signals as (
    select i.origin,
           count(*) filter (where i.health = 'fail')::integer as failures,
           -- The failures after the last 2xx of the batch: the run it leaves.
           count(*) filter (where i.health = 'fail' and (o.n is null or i.n > o.n))::integer as streak,
           o.n is not null as reset,
           coalesce(bool_or(i.health = 'fail' and i.id = l.probe_task), false) as probe_failed,
           max(now() + make_interval(secs => greatest(i.wait_ms, 0) / 1000.0)) filter (where i.health = 'hold') as hold_until,
           (array_agg(i.error order by i.n desc) filter (where i.health = 'fail'))[1] as last_error
    from input i join last_ok o on o.origin = i.origin join locked l on l.origin = i.origin
    group by i.origin, o.n
  ),
  moved as (
    update sluice.endpoints e
    set consecutive_failures = c.failures,
        paused_until = c.paused_until,
        paused_by = c.paused_by,
        pauses = c.pauses,
        probe_task = c.probe_task,
        held_until = case when s.hold_until > coalesce(cur.held_until, '-infinity') then s.hold_until else cur.held_until end,
        last_error = coalesce(s.last_error, cur.last_error),
        last_error_at = case when s.last_error is not null then now() else cur.last_error_at end,
        failures_total = cur.failures_total + s.failures,
        touched_at = now()
    from signals s
    join sluice.endpoints cur on cur.origin = s.origin
    cross join lateral (
      select case when s.reset then s.streak else cur.consecutive_failures + s.streak end as failures
    ) f
    cross join lateral (
      select s.reset and cur.paused_by = 'failures' as resume,
             cur.paused_by is null and p_pause_after > 0 and f.failures >= p_pause_after as pause,
             cur.paused_by = 'failures' and not s.reset and s.probe_failed as reprobe
    ) d
    cross join lateral (
      select f.failures,
             case when d.resume then null
                  when d.pause then now() + sluice.endpoint_probe_delay(0)
                  when d.reprobe then now() + sluice.endpoint_probe_delay(cur.pauses + 1)
                  else cur.paused_until end as paused_until,
             case when d.resume then null when d.pause then 'failures' else cur.paused_by end as paused_by,
             case when d.resume or d.pause then 0 when d.reprobe then cur.pauses + 1 else cur.pauses end as pauses,
             case when d.resume or d.pause or d.reprobe then null else cur.probe_task end as probe_task
    ) c
    where e.origin = s.origin
    returning e.origin, d.resume
  ),
  -- Attempts are counted by the dispatchers' meters (src/db/metrics.ts), failures here.
  minutes as (
    insert into sluice.endpoint_minutes as m (origin, minute, failures)
    select origin, date_trunc('minute', now()), failures from signals where failures > 0 order by origin
    on conflict (origin, minute) do update set failures = m.failures + excluded.failures
  )
  select array_agg(origin) filter (where resume) into v_resumed from moved;

  if v_resumed is null then
    return 0;
  end if;
  return sluice.endpoints_release(v_resumed);
end $$;
