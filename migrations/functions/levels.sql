-- What pushes' answers teach their levels (0016_levels.sql), called by the settle statement
-- (src/db/settle.ts) only when its batch has something to teach: a Retry-After, or an overload or
-- a success on an adaptive queue. Its plans are made once a session and run only then, so the
-- settles of queues that learn nothing pay nothing for it. This file is its one home.
--
-- p_signals: [{queue, level ('*' or the lane), signal ('ok' | 'overload' | 'hold'), adaptive,
-- leased_at, wait_ms (a hold's), cause ('HTTP 429', 'timeout', …)}], p_ids: the tasks whose
-- leases are in the batch.
-- One row per level, locked in (queue, lane) order. `n` is the level's leases in flight.
-- - An overload from a lease that began after the level was last lowered lowers it to 85%
--   (β = 0.85; TCP Reno halves, CUBIC keeps 0.7), from what it had in flight if that is less,
--   rounded down, never below 1. The sawtooth between capacity and 85% of it keeps ~92% of it in
--   use; measured (docs/performance.md), β = 0.75 held the Worker's keyed run at 78%, and the
--   429s it adds are few: a small level's cut is the same (3 → 2 either way). Older leases were
--   in flight under the old limit: that cut answered them already.
-- - A window of successes (as many as the limit, at least 8: a level at 2 would otherwise probe
--   every other push) adds one, when the level was using at least half of its limit (a level its
--   tasks do not fill learns nothing). A level 2 + 30% of its limit windows past its last cut
--   (twice the climb back from a cut, 15% of the limit at one a window, and two) has gone well
--   above where its endpoint last refused and met no overload: that endpoint takes more now,
--   and a window adds a quarter of the limit (at least one) until the next overload, a gentler
--   slow start. One a window, a capacity that went from 8 to 24 took 16 windows to follow, 2 s
--   of 100 ms pushes; now 8. The margin is for overloads that arrive late: on a Worker of 16
--   shards they reach the level a window or two after the push, and with 15% and two it
--   probed past its capacity before they came (429s 2.1-2.5% of pushes against 1.4-1.7%;
--   docs/performance.md). Windows are counted as the time since the cut over this window's
--   (`moved_at`, when the limit last moved, began it).
-- - A Retry-After (`hold`) holds the level until then, adaptive or not.
-- A level's first row comes from its first overload or hold; successes alone never make one.
create or replace function sluice.levels_learn(p_signals jsonb, p_ids bigint[]) returns integer
language plpgsql volatile as $$
declare
  v_levels integer;
begin
  with input as (
    select s.* from jsonb_to_recordset(p_signals) as s(
      queue text, level text, signal text, adaptive boolean, leased_at timestamptz, wait_ms double precision, cause text)
  ),
  signals as (
    select i.queue, i.level,
           count(*) filter (where i.signal = 'overload' and i.adaptive) as overloads,
           max(i.leased_at) filter (where i.signal = 'overload' and i.adaptive) as overload_leased_at,
           count(*) filter (where i.signal = 'ok' and i.adaptive) as oks,
           max(now() + make_interval(secs => greatest(i.wait_ms, 0) / 1000.0)) filter (where i.signal = 'hold') as hold_until,
           max(i.cause) filter (where i.signal in ('overload', 'hold')) as cause,
           -- In flight: the leases ending now, and the others (whether this statement sees the
           -- caller's writes to them or not, they are counted once).
           count(*)::integer + (select count(*)::integer from sluice.tasks t
                                where t.status = 'leased' and t.queue = i.queue and (i.level = '*' or t.lane = i.level)
                                  and t.id <> all(p_ids)) as n
    from input i
    group by i.queue, i.level
  ),
  level_rows as (
    select lv.queue, lv.lane from sluice.levels lv join signals sg on sg.queue = lv.queue and sg.level = lv.lane
    order by lv.queue, lv.lane
    for update of lv
  ),
  learnt as (
    update sluice.levels lv
    set effective = m.effective, successes = m.successes, decreased_at = m.decreased_at,
        held_until = m.held_until, reason = m.reason, moved_at = m.moved_at
    from level_rows lr
    join signals sg on sg.queue = lr.queue and sg.level = lr.lane
    join sluice.levels old on old.queue = lr.queue and old.lane = lr.lane
    cross join lateral (
      select sg.overloads > 0 and (old.decreased_at is null or sg.overload_leased_at >= old.decreased_at) as lower,
             old.effective is not null and old.successes + sg.oks >= greatest(old.effective, 8)
               and sg.n * 2 >= old.effective as grow,
             old.decreased_at is null
               or (now() - old.decreased_at) * 10 >= (now() - old.moved_at) * (20 + 3 * old.effective) as quiet,
             sg.hold_until > coalesce(old.held_until, '-infinity') as hold
    ) d
    cross join lateral (
      select case when d.lower then greatest(1, least(coalesce(old.effective, sg.n), sg.n) * 17 / 20)
                  when d.grow and d.quiet then old.effective + greatest(1, old.effective / 4)
                  when d.grow then old.effective + 1
                  else old.effective end as effective,
             case when d.lower or d.grow then 0 else old.successes + sg.oks end as successes,
             case when d.lower then now() else old.decreased_at end as decreased_at,
             case when d.hold then sg.hold_until else old.held_until end as held_until,
             case when d.lower then 'lowered: ' || sg.cause
                  when d.grow then 'raised: a window of successes'
                  when d.hold then 'held: Retry-After from ' || sg.cause
                  else old.reason end as reason,
             case when d.lower or d.grow or d.hold then now() else old.moved_at end as moved_at
    ) m
    where lv.queue = lr.queue and lv.lane = lr.lane
  ),
  first_rows as (
    insert into sluice.levels (queue, lane, effective, decreased_at, held_until, reason, moved_at)
    select sg.queue, sg.level,
           case when sg.overloads > 0 then greatest(1, sg.n * 17 / 20) end,
           case when sg.overloads > 0 then now() end,
           sg.hold_until,
           case when sg.overloads > 0 then 'lowered: ' || sg.cause
                else 'held: Retry-After from ' || sg.cause end,
           now()
    from signals sg
    where (sg.overloads > 0 or sg.hold_until is not null)
      and not exists (select 1 from sluice.levels lv where lv.queue = sg.queue and lv.lane = sg.level)
    order by sg.queue, sg.level
    on conflict (queue, lane) do nothing
  )
  select count(*) into v_levels from signals;
  return v_levels;
end $$;
