-- The claim and the lane bookkeeping it relies on (DESIGN.md §5): this file is their one home.
-- The migration runner re-applies it whenever it changes (create or replace); numbered
-- migrations keep tables, indexes and backfills. What a lane is, and why its hint may be too
-- good but never too poor: migrations/0002_limits.sql (and 0006_claim_speed.sql).

-- The lock that serialises every count-and-claim: a claim pass, a wait's decision
-- (functions/waits.sql), and anything that must not run midway through one. Taken only through
-- this function; its id is listed with the others in src/db/locks.ts.
create or replace function sluice.claim_lock() returns void
language sql volatile as $$ select pg_advisory_xact_lock(7215530002) $$;

-- How many tasks a rate with `burst` lets a claim at p_now lease at a level (0017_rate_burst.sql,
-- GCRA): with T = period_ms / limit, floor((burst · T − (max(tat, now) − now)) / T), at most
-- burst; burst when the bucket has no row (idle). A hair of slack keeps k · T from rounding
-- under k. A function of its own (not inlined), so that the claim's plan names no bucket table:
-- a pass without burst rates neither opens nor locks it.
create or replace function sluice.bucket_room(p_rate jsonb, p_queue text, p_lane text, p_now timestamptz) returns integer
language plpgsql stable as $$
declare
  v_tat timestamptz;
  v_ms float8 := (p_rate ->> 'period_ms')::float8 / (p_rate ->> 'limit')::integer;
begin
  select tat into v_tat from sluice.rate_buckets where queue = p_queue and lane = p_lane;
  return least(
    (p_rate ->> 'burst')::integer,
    floor(((p_rate ->> 'burst')::integer * v_ms - extract(epoch from greatest(coalesce(v_tat, p_now), p_now) - p_now) * 1000) / v_ms + 1e-9)::integer
  );
end $$;

-- The limit a level's claim applies (0016_levels.sql): its configured one, or on an adaptive
-- queue what it has learnt (p_learnt; null: nothing), never above the configured one, never
-- below the queue's adaptive_min, nor so low that the tasks waiting on children that hold its
-- slots would hold every one (so the deadlock refusal of functions/waits.sql stays exact).
-- One rule for the queue and the key levels (src/api/queue-ops.ts shows it). Inlined where its
-- arguments are plain values; the claim calls it only for a level that has learnt something.
create or replace function sluice.learnt_limit(p_limit integer, p_learnt integer, p_floor integer, p_waiting integer) returns integer
language sql immutable as $$
  select case when p_learnt is null then p_limit
              else least(coalesce(p_limit, p_learnt), greatest(p_learnt, p_floor, p_waiting + 1)) end
$$;

-- The round-robin mark a new lane starts with (see 0002).
create or replace function sluice.next_turn() returns bigint
language sql stable as $$ select (last_value + 1) * 10000 from sluice.claim_pass $$;

-- Makes the hints of the given lanes exact, and gives the lanes p_served (in serving order)
-- their new round-robin marks from pass p_pass: one write per lane. Lanes locked by someone else
-- (an enqueue in progress) are skipped: their hint stays too good, which is safe, their mark
-- stays old (they are served early next time), and nobody waits.
-- "Due" is judged by the wall clock, not by now(): a claim's transaction may have started
-- before it waited for the lock, and a task enqueued meanwhile is due although its run_at is
-- later than that start (promotion would not find it: it was due when it was enqueued).
-- p_now replaces the wall clock where a caller passes its own (tests move time).
-- Its plans, as the claim's, are generic: made once per session, never again for each call's
-- values (a custom plan cost more to make than to run), and never read a table or an index
-- whole (below). Its lanes are locked with skip locked, in no order (below).
-- The lanes are locked first, and their hints worked out by a statement of its own, whose
-- snapshot is taken once the locks are held: every enqueue into a locked lane has then either
-- committed (its task is seen) or waits for the lock (its trigger lowers the hint after this
-- commits). Locked and written in one statement, a hint was worked out from that statement's
-- snapshot, taken before the lock: an enqueue that wrote the lane's row (lanes_touch) and
-- committed in between had its row re-read as it is now, but its task was not counted. The hint
-- went null with the task pending, and no claim looks at a lane without a hint: the task waited
-- for the next enqueue into its lane, for ever if none came (test/db/claim-race.test.ts).
-- Other writers need no such care: they only lower hints (least()), and a task made pending by
-- a settle is due after it was created, so the claim pass that finds it due promotes it.
create or replace function sluice.lanes_recompute(p_ids bigint[], p_now timestamptz default null,
                                                 p_served bigint[] default null, p_pass bigint default null) returns void
language plpgsql set plan_cache_mode = force_generic_plan
  set enable_seqscan = off set enable_bitmapscan = off set enable_mergejoin = off as $$
declare
  v_locked bigint[];
begin
  select array_agg(l.id) into v_locked
  from (select id from sluice.lanes where id = any(p_ids) for update skip locked) l;
  update sluice.lanes k
  set head_priority = (
        select min(t.priority) from sluice.tasks t
        where t.status = 'pending' and t.queue = k.queue and t.lane = k.lane
          and t.run_at <= coalesce(p_now, clock_timestamp())
          and (t.expires_at is null or t.expires_at > coalesce(p_now, clock_timestamp()))
      ),
      served = coalesce((select p_pass * 10000 + s.ord from unnest(p_served) with ordinality as s(id, ord) where s.id = k.id), k.served),
      touched_at = coalesce(p_now, now())
  where k.id = any(v_locked);
end $$;

-- Deletes the rows of keyed lanes that hold no unfinished task and that no enqueue or claim
-- touched for p_idle_ms (0023_lanes_touched.sql), at most p_max, and returns how many: a lane is a
-- row per key ever used, and keys come and go (a key per customer, per order), so without this
-- the table grew for ever. A key that comes back within p_idle_ms keeps its lane and its turn.
-- Its levels and rate buckets are swept beside it (src/db/retention.ts). A queue keeps its lane
-- '' (made here if it had none), so that it stays known (src/db/queues.ts `queueNamesKnown`) as it
-- was while its keys had rows. A key back after its lane went gets a new one from its next
-- enqueue (lanes_touch), at the back of the round. p_now: the sweep's clock (tests move time).
-- As lanes_recompute: the lanes are locked first (skip locked: an enqueue that holds one is
-- adding a task to it), and a statement of its own, whose snapshot is taken once the locks are
-- held, checks again that each holds no task: an enqueue that committed before the lock is seen,
-- one that comes after it waits, and its trigger makes the lane again once this commits. Tasks
-- never move into a lane but by an insert, so a lane seen empty then stays empty until that.
-- The '' lanes are made first, before any lane is locked: made after, one could wait for an
-- enqueue making the same lane while that enqueue waited for a keyed lane locked here.
-- Each check is a probe of one index (a subquery with a limit is never made a join).
drop function if exists sluice.lanes_sweep(integer);
create or replace function sluice.lanes_sweep(p_max integer, p_idle_ms integer, p_now timestamptz default null) returns integer
language plpgsql set plan_cache_mode = force_generic_plan
  set enable_seqscan = off set enable_bitmapscan = off set enable_mergejoin = off as $$
declare
  v_ids bigint[];
  v_gone integer;
begin
  insert into sluice.lanes (queue, lane)
  select distinct k.queue, '' from sluice.lanes k where k.lane <> ''
  order by 1
  on conflict (queue, lane) do nothing;

  select array_agg(x.id) into v_ids from (
    select k.id from sluice.lanes k
    where k.lane <> '' and k.touched_at <= coalesce(p_now, now()) - make_interval(secs => p_idle_ms / 1000.0)
      and (select 1 from sluice.tasks t where t.status = 'pending' and t.queue = k.queue and t.lane = k.lane limit 1) is null
      and (select 1 from sluice.tasks t where t.status = 'leased' and t.queue = k.queue and t.lane = k.lane limit 1) is null
      and (select 1 from sluice.tasks t where t.status = 'waiting' and t.queue = k.queue and t.lane = k.lane limit 1) is null
    limit p_max
    for update skip locked
  ) x;
  if v_ids is null then
    return 0;
  end if;

  delete from sluice.lanes k
  where k.id = any(v_ids) and k.touched_at <= coalesce(p_now, now()) - make_interval(secs => p_idle_ms / 1000.0)
    and (select 1 from sluice.tasks t where t.status = 'pending' and t.queue = k.queue and t.lane = k.lane limit 1) is null
    and (select 1 from sluice.tasks t where t.status = 'leased' and t.queue = k.queue and t.lane = k.lane limit 1) is null
    and (select 1 from sluice.tasks t where t.status = 'waiting' and t.queue = k.queue and t.lane = k.lane limit 1) is null;
  get diagnostics v_gone = row_count;
  return v_gone;
end $$;

-- Whether a claim pass could find anything to claim or resume now: a lane with a hint (a hint
-- may be too good, never too poor, so "none" is sure), or a task waiting on children (the pass
-- resumes those). A settle says it (src/db/settle.ts), so that a dispatcher after a pass that
-- found less than it asked for claims again only when a freed slot may be wanted. Each lookup
-- reads one index entry at most, whatever the statistics say (as the claim, below).
create or replace function sluice.work_waits() returns boolean
language sql stable set enable_seqscan = off set enable_bitmapscan = off as $$
  select exists (select 1 from sluice.lanes where head_priority is not null)
      or exists (select 1 from sluice.tasks where status = 'waiting')
$$;

-- After every statement that inserts tasks: lanes that gained due pending tasks get their hint
-- lowered, and new lanes their row (rows locked in (queue, lane) order, as by every writer that
-- waits for them). Updates need no trigger (0006): a task made pending again is promoted by the
-- next claim pass.
create or replace function sluice.lanes_touch() returns trigger
language plpgsql as $$
begin
  insert into sluice.lanes as k (queue, lane, head_priority, task_limit, task_rate_limit, task_rate_period_ms)
  select c.queue, c.lane, min(c.priority) filter (where c.run_at <= now()),
         (array_agg(c.concurrency_limit order by c.id) filter (where c.concurrency_limit is not null))[1],
         (array_agg(c.rate_limit order by c.id) filter (where c.rate_limit is not null))[1],
         (array_agg(c.rate_period_ms order by c.id) filter (where c.rate_limit is not null))[1]
  from changed c
  where c.status = 'pending'
  group by c.queue, c.lane
  order by c.queue, c.lane
  on conflict (queue, lane) do update
    set head_priority = least(k.head_priority, excluded.head_priority),
        touched_at = now(),
        task_limit = coalesce(k.task_limit, excluded.task_limit),
        -- Like the limit: the first rate a lane's tasks gave stays (both fields together).
        task_rate_period_ms = case when k.task_rate_limit is null then excluded.task_rate_period_ms else k.task_rate_period_ms end,
        task_rate_limit = coalesce(k.task_rate_limit, excluded.task_rate_limit);
  return null;
end $$;

-- The trigger that runs it (0015_lanes.sql dropped the one that ran keys_touch, its old name);
-- made again whenever this file is applied, with the function it runs.
drop trigger if exists tasks_lanes_on_insert on sluice.tasks;
create trigger tasks_lanes_on_insert after insert on sluice.tasks
  referencing new table as changed for each statement execute function sluice.lanes_touch();

-- The claim before pull queues (0020_pull.sql) took four arguments; its five-argument successor
-- below answers four-argument calls too (p_pull defaults to null).
drop function if exists sluice.claim(integer, integer, jsonb, timestamptz);

-- One claim pass (DESIGN.md §5). p_queues holds the environment's queue settings
-- ({"<queue>": {"concurrency", "key_concurrency", "priority", "paused"}}); rows of
-- sluice.queues override them field by field. Limits are hard: a leased task counts from its
-- claim. p_max is at most 1,000. p_now: the pass's clock, default the database's.
--
-- 1. A transaction-scoped advisory lock serialises count-and-claim across dispatchers; every
--    statement after it takes a fresh snapshot, so it sees every earlier claim.
-- 2. Tasks that came due since the last passes lower their lanes' hints (with a margin that
--    covers transactions committing late; lowering twice is harmless). A lane another
--    transaction holds is looked at again by the next pass.
-- 3. Per queue, lanes with due tasks are taken in turn: best hint, then least recently served
--    (round-robin), skipping lanes at their limit. Each yields up to its remaining slots of
--    ready tasks, FIFO within the lane.
-- 4. Candidates are ranked by queue priority, task priority, then their place in their lane
--    (every lane's 1st before any lane's 2nd), then the lane's turn; the queue budgets, then
--    the cluster budget and p_max, cut the ranking. The chosen tasks are leased.
-- 5. The examined lanes get exact hints, the served ones new round-robin marks, in one write per
--    lane. A lane whose hint was too good yielded nothing; if that left room, the pass runs
--    again (4 rounds at most).
-- Rate limits (0011_rate_limits.sql) cut a queue's budget and a lane's room like the
-- concurrency limits do, by the live grants at their level; every task leased under a rate
-- leaves a grant at each limited level. A level's hold (a Retry-After) and an adaptive queue's
-- learnt limit (0016_levels.sql) cut them too.
-- Pull queues (0020_pull.sql, setting `pull`) are the dispatcher's to skip: p_pull null claims
-- from pushed queues only, p_pull = a queue's name from that pulled queue only (a consumer's
-- POST /v1/queues/:queue/lease). Either way the pass counts every lease, pushed or pulled,
-- against the cluster cap, under the one lock.
-- Its plans are made once per session (generic), from the statistics of that moment, and kept
-- until they change. Made while the task table was empty (an autovacuum had found every task
-- finished), they read it, or its pending tasks' index, whole for what a pass looked up, and a
-- keyed pass grew from a few ms to 30-48 ms as the table filled again, until the next
-- autovacuum (test/db/claim-plans.test.ts).
-- So the planner is kept from sequential scans, bitmap scans and merge joins here: every table the
-- pass reads has an index for what it looks up, and each lookup can use one index only
-- (0022_one_index_per_lookup.sql). A lane is found by its id, or by its (queue, lane) in a lateral
-- lookup, never by a join that the planner could turn into a walk of a whole index.
-- The lanes a pass locks it locks with skip locked, in no particular order: it never waits for
-- a lane, so the order that keeps waiting writers from deadlocking (queue, lane) is not needed,
-- and sorting for it made the planner read the lanes' index whole.
create or replace function sluice.claim(p_max integer, p_cluster_cap integer, p_queues jsonb, p_now timestamptz default null,
                                        p_pull text default null)
returns setof sluice.tasks
language plpgsql volatile set plan_cache_mode = force_generic_plan
  set enable_seqscan = off set enable_bitmapscan = off set enable_mergejoin = off as $$
declare
  v_ids bigint[];
  v_examined bigint[];
  v_served bigint[];
  v_stale boolean;
  v_all_examined bigint[] := '{}';
  v_claimed integer := 0;
  v_count integer;
  v_want integer := p_max;
  v_round integer := 0;
  v_pass bigint;
  v_now timestamptz;
  v_held_queues text[];
  v_held_limits text[];
  v_grants jsonb;
  v_buckets jsonb;
  v_waiting boolean;
  v_blocks boolean;
  v_probes text[];
  v_probed jsonb;
begin
  perform sluice.claim_lock();
  -- The pass's clock starts once the lock is held (now() is when the transaction began,
  -- possibly long before, while it waited); a caller may pass its own (tests move time).
  v_now := coalesce(p_now, clock_timestamp());

  -- Waiting tasks whose children have all finished are pending again (0012_waits.sql). Their
  -- due time stays what it was, so that in their lane (FIFO) they come before tasks that came
  -- while they waited: the slot they held goes back to them. Promotion looks only at recent due
  -- times, so their lanes' hints are lowered here: lanes first, skipping any an enqueue holds
  -- (its tasks resume at the next pass), so that nobody waits on a lock while holding the claim's.
  -- Most passes find no waiting task at all: then the resume step and the per-lane count of
  -- waiting holders are skipped (one probe of the waiting tasks' partial index).
  v_waiting := exists (select 1 from sluice.tasks where status = 'waiting');
  -- Origins that hold their tasks back (0027_endpoints.sql): most passes find none (one probe
  -- of an empty partial index), and then no candidate is looked up in sluice.endpoints. Of the
  -- paused ones whose probe is due, this pass may send one probe each: their rows are locked
  -- (skip locked: a settle writing one now has the next pass probe it), so that no other pass
  -- sends a second meanwhile.
  v_blocks := exists (select 1 from sluice.endpoints
                      where (paused_until is not null or held_until is not null) and (paused_until is not null or held_until > v_now));
  if v_blocks then
    select array_agg(origin) into v_probes from (
      select origin from sluice.endpoints
      where (paused_until is not null or held_until is not null) and paused_by = 'failures' and paused_until <= v_now
      for update skip locked
    ) p;
  end if;
  if v_waiting then
    with ready as (
      select p.id, p.queue, p.lane, p.priority from sluice.tasks p
      where p.status = 'waiting' and not exists (
        select 1 from sluice.tasks c
        where c.parent_id = p.id and c.status in ('pending', 'leased', 'waiting')
          and (p.waiting_on is null or c.id = any(p.waiting_on))
      )
    ),
    locked as (
      select k.id, k.queue, k.lane from (select distinct queue, lane from ready) r
      cross join lateral (
        select k.id, k.queue, k.lane from sluice.lanes k where k.queue = r.queue and k.lane = r.lane for update skip locked
      ) k
    ),
    resumed as (
      update sluice.tasks p
      set status = 'pending', waiting_on = null, lent_queue = false, lent_key = false, updated_at = v_now
      from ready r join locked l on l.queue = r.queue and l.lane = r.lane
      where p.id = r.id and p.status = 'waiting'
      returning p.queue, p.lane, p.priority
    )
    update sluice.lanes k
    set head_priority = least(k.head_priority, (select min(r.priority) from resumed r where r.queue = k.queue and r.lane = k.lane))
    where k.id = any(array(select l.id from locked l where exists (select 1 from resumed r where r.queue = l.queue and r.lane = l.lane)));
  end if;

  -- Lanes held by another transaction (an enqueue in progress) are skipped, not waited for. If
  -- one of them needed its hint lowered, the window does not move on (the next pass looks at
  -- it again); a skipped lane whose hint is already good enough does not hold it back.
  with came_due as (
    select t.queue, t.lane, min(t.priority) as priority
    from sluice.tasks t
    where t.status = 'pending' and t.run_at > t.created_at
      and t.run_at > (select least(promoted_to, v_now) from sluice.promotion) - interval '10 seconds'
      and t.run_at <= v_now
    group by t.queue, t.lane
  ),
  locked as (
    select k.id, d.priority from came_due d
    cross join lateral (
      select k.id from sluice.lanes k where k.queue = d.queue and k.lane = d.lane for update skip locked
    ) k
  ),
  lowered as (
    update sluice.lanes k set head_priority = least(k.head_priority, (select l.priority from locked l where l.id = k.id))
    where k.id = any(array(select id from locked))
  )
  -- The window moves on only for the dispatcher's passes: its next-due probe (src/db/due.ts)
  -- reads "promoted" as "seen by a pass that could claim it", and a consumer's pass (p_pull)
  -- claims from its own queue only. Its lowered hints stay: a hint may be too good, never too poor.
  update sluice.promotion set promoted_to = case
    when exists (
      select 1 from came_due d
      cross join lateral (
        select k.id, k.head_priority from sluice.lanes k where k.queue = d.queue and k.lane = d.lane offset 0
      ) k
      where k.id not in (select id from locked) and (k.head_priority is null or k.head_priority > d.priority)
    ) then promoted_to
    else v_now
  end
  where p_pull is null;

  loop
    v_round := v_round + 1;

    with recursive
    -- Leases are counted only where a limit reads them, so that a pass costs nothing for the
    -- leases it does not limit (an endpoint may hold thousands, each kept by heartbeats): all of
    -- them under a cluster cap, a queue's under its limit (budgets, below), a lane's under its
    -- key's (lanes, below). Each count is then bounded by the limit it serves, expired leases
    -- aside. An expired lease holds no slot: its task is reaped by the next dispatcher run.
    cluster as (
      select case when p_cluster_cap is null then v_want
                  else greatest(0, least(v_want, p_cluster_cap - (select count(*)::integer from sluice.tasks
                                                                  where status = 'leased' and lease_expires_at > v_now)))
             end::integer as budget
    ),
    -- Distinct queues with due lanes: a skip scan over lanes_walk.
    due_queues(queue) as (
      (select queue from sluice.lanes where head_priority is not null order by queue limit 1)
      union all
      select (select k.queue from sluice.lanes k where k.head_priority is not null and k.queue > d.queue order by k.queue limit 1)
      from due_queues d where d.queue is not null
    ),
    budgets as (
      select d.queue, s.key_concurrency, s.key_rate, s.rate, s.priority, s.paused, s.adaptive, s.adaptive_min, e.held,
             (e.concurrency - l.n - wt.n) <= 0 as queue_full, r.room <= 0 as rate_full,
             case when s.paused or e.held then 0
                  else least((select budget from cluster), coalesce(e.concurrency - l.n - wt.n, v_want),
                             coalesce(r.room, v_want)) end::integer as budget
      from due_queues d
      left join sluice.queues q on q.name = d.queue
      cross join lateral (
        select coalesce(q.paused, (p_queues -> d.queue ->> 'paused')::boolean, false) as paused,
               coalesce((q.options ->> 'concurrency')::integer, (p_queues -> d.queue ->> 'concurrency')::integer) as concurrency,
               coalesce((q.options ->> 'key_concurrency')::integer, (p_queues -> d.queue ->> 'key_concurrency')::integer) as key_concurrency,
               coalesce((q.options ->> 'priority')::integer, (p_queues -> d.queue ->> 'priority')::integer, 0) as priority,
               coalesce(q.options -> 'rate', p_queues -> d.queue -> 'rate') as rate,
               coalesce(q.options -> 'key_rate', p_queues -> d.queue -> 'key_rate') as key_rate,
               coalesce((q.options ->> 'adaptive')::boolean, (p_queues -> d.queue ->> 'adaptive')::boolean, false) as adaptive,
               coalesce((q.options ->> 'adaptive_min')::integer, (p_queues -> d.queue ->> 'adaptive_min')::integer, 1) as adaptive_min,
               coalesce((q.options ->> 'pull')::boolean, (p_queues -> d.queue ->> 'pull')::boolean, false) as pull
      ) s
      -- What the queue learnt from its endpoint (0016_levels.sql): a Retry-After holds it, and
      -- an adaptive queue's limit is the one it has come to, never above the configured one and
      -- never so low that tasks waiting on children would hold every slot.
      left join sluice.levels lv on lv.queue = d.queue and lv.lane = '*'
      -- A waiting task holds its queue's slot unless it lent it to a child (no cluster slot):
      -- counted where the queue has a limit, or may learn one. Each count ends in `offset 0`,
      -- which keeps it a subquery worked out once per queue (as `lim` and `room` below).
      cross join lateral (
        select case when v_waiting and (s.concurrency is not null or (s.adaptive and lv.effective is not null))
                    then (select count(*)::integer from sluice.tasks t
                          where t.status = 'waiting' and not t.lent_queue and t.queue = d.queue)
                    else 0 end as n
        offset 0
      ) wt
      cross join lateral (
        select coalesce(lv.held_until > v_now, false) as held,
               sluice.learnt_limit(s.concurrency, case when s.adaptive then lv.effective end, s.adaptive_min, wt.n) as concurrency
      ) e
      cross join lateral (
        select case when e.concurrency is null then 0
                    else (select count(*)::integer from sluice.tasks t
                          where t.status = 'leased' and t.lease_expires_at > v_now and t.queue = d.queue) end as n
        offset 0
      ) l
      -- The queue's rate: its limit less the grants still inside their period; with a burst, what
      -- its bucket holds (0017_rate_burst.sql).
      left join lateral (
        select case when s.rate ? 'burst'
                    then sluice.bucket_room(s.rate, d.queue, '*', v_now)
                    else (s.rate ->> 'limit')::integer - (select count(*)::integer from sluice.rate_grants g
                                                         where g.queue = d.queue and g.lane = '*' and g.until > v_now) end as room
      ) r on s.rate is not null
      -- A case, not `s.pull = (p_pull is not null) and …`: with that, the planner misjudged the
      -- rows and a keyed pass cost a fifth more (100 keys, passes of 32: 7.3 ms against 6.1).
      where d.queue is not null and case when p_pull is null then not s.pull else d.queue = p_pull and s.pull end
    ),
    lanes as (
      select b.queue, b.priority as queue_priority, b.budget, w.id as key_id, w.lane, w.served, w.room, w.key_rate
      from budgets b
      cross join lateral (
        select k.id, k.lane, k.served, least(room.value, rate_room.value) as room, key_rate.value as key_rate
        from sluice.lanes k
        -- A key's hold and learnt limit, as the queue's above (keyless tasks learn at the queue).
        -- Probed lane by lane (the limit keeps it a nested loop), so that the walk stays an
        -- ordered scan of lanes_walk that stops at the budget. As a plain join, the planner
        -- hashed sluice.levels and then had to work out the room of every due lane before
        -- sorting them all: a pass's cost grew with the number of keys with due work.
        left join lateral (
          select lv.effective, lv.held_until from sluice.levels lv
          where lv.queue = k.queue and lv.lane = k.lane and k.lane <> '' limit 1
        ) kv on true
        -- The key's limit (`lim`) and its room (`room`, below) each end in `offset 0`, which keeps
        -- them subqueries worked out once per lane: pulled up, their expressions were copied
        -- wherever they are used (the filter, the select, each branch of the case), and the key's
        -- limit was looked up and its leases counted several times over (a keyed pass of 32: 4%).
        cross join lateral (
          select case when k.lane = '' then null else coalesce(
            (select kl."limit" from sluice.key_limits kl where kl.queue = k.queue and kl.concurrency_key = substr(k.lane, 3)),
            k.task_limit,
            b.key_concurrency
          ) end as value,
          b.adaptive and kv.effective is not null as learnt
          offset 0
        ) lim
        -- Its room: the limit less the tasks holding its slots. The learnt rule is called only where
        -- the key has learnt something: its arguments hold subqueries, so it runs as a call, not
        -- inlined, and a call per lane per pass is what a keyed claim cannot afford.
        cross join lateral (
          select (select count(*)::integer from sluice.tasks t
                  where v_waiting and t.status = 'waiting' and not t.lent_key
                    and t.queue = k.queue and t.lane = k.lane) as n
        ) waiting
        cross join lateral (
          select case when lim.value is null and not lim.learnt then v_want
                      else case when lim.learnt then sluice.learnt_limit(lim.value, kv.effective, b.adaptive_min, waiting.n) else lim.value end
                           - (select count(*)::integer from sluice.tasks t
                              where t.status = 'leased' and t.lease_expires_at > v_now
                                and t.queue = k.queue and t.lane = k.lane)
                           - waiting.n end as value
          offset 0
        ) room
        -- The key's rate: the one its first task gave, else the queue's key_rate.
        cross join lateral (
          select case when k.lane = '' then null
                      when k.task_rate_limit is not null then jsonb_build_object('limit', k.task_rate_limit, 'period_ms', k.task_rate_period_ms)
                      else b.key_rate end as value
        ) key_rate
        cross join lateral (
          select case when key_rate.value is null then v_want
                      when key_rate.value ? 'burst'
                      then sluice.bucket_room(key_rate.value, k.queue, k.lane, v_now)
                      else (key_rate.value ->> 'limit')::integer - (select count(*)::integer from sluice.rate_grants g
                                                                    where g.queue = k.queue and g.lane = k.lane and g.until > v_now) end as value
        ) rate_room
        where k.queue = b.queue and k.head_priority is not null and room.value > 0 and rate_room.value > 0
          and not coalesce(kv.held_until > v_now, false)
        order by k.head_priority, k.served, k.id
        limit b.budget
      ) w
      where b.budget > 0
    ),
    -- The ready tasks of each lane, with what their origin says (0027_endpoints.sql): a task
    -- whose origin is held (a Retry-After) or paused is parked until the hold ends, or the
    -- probe's time (an hour at most, for a pause by hand), its attempt untouched. Of a paused
    -- origin whose probe is due (v_probes), the first task is the probe, and the others are
    -- parked until its lease would end. Looked up only when some origin holds tasks back.
    found as (
      select la.*, t.id, t.priority, t.run_at, t.lease_ms, o.origin,
             case when o.origin is null then null
                  when o.paused_until > v_now then least(greatest(o.paused_until, o.held_until), v_now + interval '1 hour')
                  when o.held_until > v_now then o.held_until
                  when o.paused_until is not null and not o.origin = any(coalesce(v_probes, '{}')) then v_now + interval '1 second'
             end as park_until,
             o.origin is not null and o.paused_until <= v_now and o.origin = any(coalesce(v_probes, '{}')) and not coalesce(o.held_until > v_now, false) as probe
      from lanes la
      cross join lateral (
        select t.id, t.priority, t.run_at, t.lease_ms, t.url from sluice.tasks t
        where t.status = 'pending' and t.queue = la.queue and t.lane = la.lane
          and t.run_at <= v_now and (t.expires_at is null or t.expires_at > v_now)
        order by t.priority, t.run_at, t.id
        limit least(la.room, la.budget)
      ) t
      left join lateral (
        select e.origin, e.paused_until, e.held_until from sluice.endpoints e
        where v_blocks and e.origin = sluice.url_origin(t.url) and (e.paused_until is not null or e.held_until is not null)
      ) o on true
    ),
    probes as (
      select f.id, f.origin, f.lease_ms,
             row_number() over (partition by f.origin order by f.priority, f.run_at, f.id) as k,
             first_value(f.lease_ms) over (partition by f.origin order by f.priority, f.run_at, f.id) as probe_lease_ms
      from found f where f.probe
    ),
    parked as (
      update sluice.tasks t set run_at = p.until, held = true, updated_at = v_now
      from (select f.id, f.park_until as until from found f where f.park_until is not null
            union all
            select p.id, v_now + make_interval(secs => p.probe_lease_ms / 1000.0) from probes p where p.k > 1) p
      where t.id = p.id and t.id = any(array(select id from found where park_until is not null or probe)) and t.status = 'pending'
    ),
    candidates as (
      select f.queue, f.queue_priority, f.budget, f.key_id, f.lane, f.served, f.room, f.key_rate, f.id, f.priority,
             row_number() over (partition by f.key_id order by f.priority, f.run_at, f.id) as place
      from found f
      where f.park_until is null and (not f.probe or f.id in (select id from probes where k = 1))
    ),
    within_queue as (
      select c.*, row_number() over (partition by c.queue order by c.priority, c.place, c.served, c.key_id) as queue_rank
      from candidates c
    ),
    chosen as (
      select id, key_id, overall from (
        select w.id, w.key_id,
               row_number() over (order by w.queue_priority, w.priority, w.place, w.served, w.key_id) as overall
        from within_queue w where w.queue_rank <= w.budget
      ) x
      where x.overall <= (select budget from cluster)
    ),
    -- Due queues this pass leases nothing from, and what stops each (for /metrics): paused, its
    -- own limit, the cluster's (no room, or the room went to queues ranked before it), or every
    -- due key at its limit. A queue whose lanes only promised too much is not held back.
    held as (
      select b.queue, case when b.paused then 'paused' when b.held then 'held' when b.queue_full then 'queue' when b.rate_full then 'rate'
                           when b.budget = 0 then 'cluster'
                           when not exists (select 1 from lanes la where la.queue = b.queue) then 'key'
                           else 'cluster' end as reason
      from budgets b
      where not exists (select 1 from chosen ch join lanes la on la.key_id = ch.key_id where la.queue = b.queue)
        and (b.budget = 0 or not exists (select 1 from lanes la where la.queue = b.queue)
             or exists (select 1 from candidates c where c.queue = b.queue))
    ),
    -- What the chosen tasks use of rate limits: a grant per limited level, or a token of its
    -- bucket when the rate has a burst.
    grants as (
      select la.queue, '*' as lane, b.rate
      from chosen ch join lanes la on la.key_id = ch.key_id join budgets b on b.queue = la.queue
      where b.rate is not null
      union all
      select la.queue, la.lane, la.key_rate
      from chosen ch join lanes la on la.key_id = ch.key_id
      where la.key_rate is not null
    )
    select (select array_agg(id) from chosen),
           (select array_agg(distinct key_id) from lanes),
           (select array_agg(key_id order by first_turn) from (select key_id, min(overall) as first_turn from chosen group by key_id) s),
           exists (select 1 from lanes la where not exists (select 1 from candidates c where c.key_id = la.key_id)),
           (select jsonb_agg(jsonb_build_object('origin', p.origin, 'id', p.id, 'lease_ms', p.lease_ms))
              from probes p where p.k = 1 and p.id in (select id from chosen)),
           (select array_agg(queue order by queue) from held),
           (select array_agg(reason order by queue) from held),
           (select jsonb_agg(jsonb_build_array(queue, lane, (rate ->> 'period_ms')::integer)) from grants where not rate ? 'burst'),
           (select jsonb_agg(jsonb_build_array(queue, lane, (rate ->> 'period_ms')::float8 / (rate ->> 'limit')::integer,
                                               (rate ->> 'burst')::integer, n) order by queue, lane)
              from (select queue, lane, rate, count(*)::integer as n from grants where rate ? 'burst' group by queue, lane, rate) x)
    into v_ids, v_examined, v_served, v_stale, v_probed, v_held_queues, v_held_limits, v_grants, v_buckets;

    -- Counted once per pass, from what its first round saw; nothing is written when nothing is held.
    -- Not for a consumer's pass: a waiting pull claims again and again, and each would count.
    if v_round = 1 and v_held_queues is not null and p_pull is null then
      insert into sluice.counters as c (metric, queue, label, value)
      select 'held_back', q, l, 1 from unnest(v_held_queues, v_held_limits) as h(q, l) order by 1, 2, 3
      on conflict (metric, queue, label) do update set value = c.value + 1;
    end if;

    if v_ids is not null then
      -- Straight into the result: no row is copied into an array on its way out.
      return query
        update sluice.tasks t
        set status = 'leased',
            lease_id = gen_random_uuid(),
            leased_at = v_now,
            lease_expires_at = v_now + make_interval(secs => t.lease_ms / 1000.0),
            held = false,
            attempts = t.attempts + 1,
            updated_at = v_now
        where t.id = any(v_ids) and t.status = 'pending'
        returning t.*;
      get diagnostics v_count = row_count;
      v_claimed := v_claimed + v_count;
      if v_grants is not null then
        insert into sluice.rate_grants (queue, lane, granted, until)
        select g ->> 0, g ->> 1, v_now, v_now + make_interval(secs => (g ->> 2)::numeric / 1000)
        from jsonb_array_elements(v_grants) g;
      end if;
      -- Each bucket's arrival time moves on by T per task from now, or from where it was if later;
      -- the next task may go τ = (burst − 1) · T before it.
      if v_buckets is not null then
        insert into sluice.rate_buckets as rb (queue, lane, tat, next_at)
        select x ->> 0, x ->> 1,
               v_now + make_interval(secs => (x ->> 2)::float8 * (x ->> 4)::integer / 1000),
               v_now + make_interval(secs => (x ->> 2)::float8 * ((x ->> 4)::integer - (x ->> 3)::integer + 1) / 1000)
        from jsonb_array_elements(v_buckets) x
        on conflict (queue, lane) do update
          set tat = greatest(rb.tat, v_now) + (excluded.tat - v_now),
              next_at = greatest(rb.tat, v_now) + (excluded.next_at - v_now);
      end if;
    end if;
    if v_served is not null then
      v_pass := nextval('sluice.claim_pass');
    end if;
    v_all_examined := v_all_examined || coalesce(v_examined, '{}');
    -- A probe sent: its origin waits for its answer (the settle's, functions/endpoints.sql), at
    -- most until its lease ends, when the next pass may send another.
    if v_probed is not null then
      update sluice.endpoints e
      set paused_until = v_now + make_interval(secs => (p ->> 'lease_ms')::numeric / 1000), probe_task = (p ->> 'id')::bigint
      from jsonb_array_elements(v_probed) p
      where e.origin = p ->> 'origin';
      v_probes := array(select unnest(v_probes) except select p ->> 'origin' from jsonb_array_elements(v_probed) p);
      v_probed := null;
    end if;

    v_want := p_max - v_claimed;
    exit when not v_stale or v_want <= 0 or v_round >= 4;
    -- Another round: correct the hints that promised too much, and mark the lanes served, so
    -- that it walks them as they are now.
    perform sluice.lanes_recompute(v_examined, p_now, v_served, v_pass);
    v_served := null;
  end loop;

  -- Every lane looked at gets its exact hint, and those the last round served their turn.
  perform sluice.lanes_recompute(v_all_examined, p_now, v_served, v_pass);
end $$;
