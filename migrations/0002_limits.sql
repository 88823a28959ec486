-- Concurrency limits (DESIGN.md §5): per-key lanes, per-key limit overrides, and a claim that
-- counts leased rows and claims within the cluster, queue and key limits in one statement.
--
-- A lane is one concurrency key of one queue; keyless tasks of a queue share the lane ''.
-- `sluice.keys` holds one row per lane with a hint of its best pending task (head_priority)
-- and its earliest one (ready_at). Every statement that makes tasks pending lowers the hints
-- (a trigger, so no path can forget); a claim recomputes them exactly for the lanes it looks
-- at. A hint is only ever too early or too good, never hides a task: the claim reads the
-- tasks themselves. Slots are never counted from the hints: only from leased task rows.

alter table sluice.tasks
  add column lane text generated always as (case when concurrency_key is null then '' else 'k:' || concurrency_key end) stored;

-- The claim reads each lane's ready tasks in (priority, run_at, id) order, and its earliest.
create index tasks_lane_order on sluice.tasks (queue, lane, priority, run_at, id) where status = 'pending';
create index tasks_lane_due on sluice.tasks (queue, lane, run_at) where status = 'pending';
-- In-flight counts per cluster, queue and lane come from the leased rows themselves.
create index tasks_lane_leased on sluice.tasks (queue, lane) where status = 'leased';
drop index sluice.tasks_ready;
-- Lease calls and admin releases find a task by its lease.
create unique index tasks_lease_id on sluice.tasks (lease_id) where lease_id is not null;

create table sluice.keys (
  id              bigint generated always as identity primary key,
  queue           text not null,
  lane            text not null,
  -- The lowest priority among the lane's pending tasks, and their earliest run_at
  -- (both null when it has none).
  head_priority   integer,
  ready_at        timestamptz,
  -- Round-robin mark: higher = served more recently. New lanes start at 0 (first in line).
  served          bigint not null default 0,
  -- The limit the first task of this lane gave (its concurrency_limit), when none is configured.
  task_limit      integer,
  unique (queue, lane),
  constraint keys_head_iff_ready check ((head_priority is null) = (ready_at is null)),
  constraint keys_task_limit_positive check (task_limit is null or task_limit >= 1)
);
create index keys_ready on sluice.keys (queue, ready_at) where ready_at is not null;

-- Run-time per-key limits (PUT /v1/queues/:queue/keys/:key); they win until deleted.
create table sluice.key_limits (
  queue           text not null,
  concurrency_key text not null,
  "limit"         integer not null check ("limit" >= 1),
  updated_at      timestamptz not null default now(),
  primary key (queue, concurrency_key)
);

create sequence sluice.claim_pass;

-- A queue's run-time override of `paused` is tri-state: null leaves the environment's value.
alter table sluice.queues alter column paused drop not null, alter column paused drop default;
update sluice.queues set paused = null where paused = false;

-- Keeps the lane hints true after every statement that inserts or updates tasks: lanes that
-- gained pending tasks get their hints lowered; lanes that lost pending tasks by cancellation
-- or expiry get them recomputed (a claim recomputes the lanes it claims from itself). Rows
-- are locked in (queue, lane) order, as the claim locks them, so the two never deadlock.
create function sluice.keys_touch() returns trigger
language plpgsql as $$
begin
  insert into sluice.keys as k (queue, lane, head_priority, ready_at, task_limit)
  select c.queue, c.lane, min(c.priority), min(c.run_at),
         (array_agg(c.concurrency_limit order by c.id) filter (where c.concurrency_limit is not null))[1]
  from changed c
  where c.status = 'pending'
  group by c.queue, c.lane
  order by c.queue, c.lane
  on conflict (queue, lane) do update
    set head_priority = least(k.head_priority, excluded.head_priority),
        ready_at = least(k.ready_at, excluded.ready_at),
        task_limit = coalesce(k.task_limit, excluded.task_limit);

  if tg_op = 'UPDATE' then
    perform sluice.keys_recompute(array(
      select distinct k.id from before b
      join changed c on c.id = b.id
      join sluice.keys k on k.queue = b.queue and k.lane = b.lane
      where b.status = 'pending' and c.status in ('cancelled', 'expired')
    ));
  end if;
  return null;
end $$;

-- Makes the hints of the given lanes exact (locking them in (queue, lane) order first).
create function sluice.keys_recompute(p_ids bigint[]) returns void
language plpgsql as $$
begin
  if cardinality(p_ids) = 0 then
    return;
  end if;
  perform 1 from sluice.keys where id = any(p_ids) order by queue, lane for update;
  update sluice.keys k
  set head_priority = (select min(t.priority) from sluice.tasks t where t.status = 'pending' and t.queue = k.queue and t.lane = k.lane),
      ready_at = (select min(t.run_at) from sluice.tasks t where t.status = 'pending' and t.queue = k.queue and t.lane = k.lane)
  where k.id = any(p_ids);
end $$;

create trigger tasks_keys_on_insert after insert on sluice.tasks
  referencing new table as changed for each statement execute function sluice.keys_touch();
create trigger tasks_keys_on_update after update on sluice.tasks
  referencing old table as before new table as changed for each statement execute function sluice.keys_touch();

-- Lanes for tasks already pending.
insert into sluice.keys (queue, lane, head_priority, ready_at)
select queue, lane, min(priority), min(run_at) from sluice.tasks where status = 'pending'
group by queue, lane order by queue, lane;

drop function sluice.claim(integer);

-- One claim pass (DESIGN.md §5). p_queues holds the environment's queue settings
-- ({"<queue>": {"concurrency", "key_concurrency", "priority", "paused"}}); rows of
-- sluice.queues override them. Limits are hard: a leased task counts from its claim.
--
-- 1. A transaction-scoped advisory lock serialises count-and-claim across dispatchers; the
--    claim statement runs after it is granted, so its snapshot sees every earlier claim.
-- 2. Per queue (queue priority first), the lanes whose tasks are due are taken in turn:
--    best head priority, then least recently served (round-robin), skipping lanes at their
--    limit. Each yields up to its remaining slots of ready tasks, FIFO within the lane.
-- 3. Candidates are ranked by queue priority, task priority, then their place in their lane
--    (1st of every lane before any 2nd), then the lane's turn; the queue budgets, then the
--    cluster budget and p_max, cut the ranking.
-- 4. The examined lanes get exact hints again, and the served ones a new round-robin mark.
create function sluice.claim(p_max integer, p_cluster_cap integer, p_queues jsonb)
returns setof sluice.tasks
language plpgsql volatile as $$
declare
  v_claimed sluice.tasks[];
  v_examined bigint[];
  v_served bigint[];
  v_stale boolean;
  v_all sluice.tasks[] := '{}';
  v_want integer := p_max;
  v_pass bigint;
  v_round integer := 0;
begin
  perform pg_advisory_xact_lock(7215530002);

  -- A lane whose hint promised ready tasks it no longer has yields nothing; its hint is
  -- corrected below and the pass runs again (a few times at most) for the room it left.
  loop
  v_round := v_round + 1;
  with recursive
  leased as (
    select queue, lane, count(*)::integer as n
    from sluice.tasks where status = 'leased'
    group by queue, lane
  ),
  cluster as (
    select greatest(0, least(v_want, coalesce(p_cluster_cap - (select coalesce(sum(n), 0) from leased), v_want)))::integer as budget
  ),
  -- Distinct queues with due lanes: a skip scan over keys_ready.
  due_queues(queue) as (
    (select queue from sluice.keys where ready_at is not null order by queue limit 1)
    union all
    select (select k.queue from sluice.keys k where k.ready_at is not null and k.queue > d.queue order by k.queue limit 1)
    from due_queues d where d.queue is not null
  ),
  queues as (
    select d.queue,
           coalesce(q.paused, (p_queues -> d.queue ->> 'paused')::boolean, false) as paused,
           coalesce((q.options ->> 'concurrency')::integer, (p_queues -> d.queue ->> 'concurrency')::integer) as concurrency,
           coalesce((q.options ->> 'key_concurrency')::integer, (p_queues -> d.queue ->> 'key_concurrency')::integer) as key_concurrency,
           coalesce((q.options ->> 'priority')::integer, (p_queues -> d.queue ->> 'priority')::integer, 0) as priority
    from due_queues d
    left join sluice.queues q on q.name = d.queue
    where d.queue is not null
  ),
  budgets as (
    select qs.*, least((select budget from cluster), coalesce(qs.concurrency - coalesce(sum(l.n), 0), v_want))::integer as budget
    from queues qs left join leased l on l.queue = qs.queue
    where not qs.paused
    group by qs.queue, qs.paused, qs.concurrency, qs.key_concurrency, qs.priority
  ),
  lanes as (
    select b.queue, b.priority as queue_priority, b.budget, k.id as key_id, k.lane, k.served, k.room
    from budgets b
    cross join lateral (
      select k.id, k.lane, k.served, k.head_priority,
             case when lim.value is null then v_want else lim.value - coalesce(l.n, 0) end as room
      from sluice.keys k
      left join leased l on l.queue = k.queue and l.lane = k.lane
      cross join lateral (
        select case when k.lane = '' then null else coalesce(
          (select kl."limit" from sluice.key_limits kl where kl.queue = k.queue and kl.concurrency_key = substr(k.lane, 3)),
          k.task_limit,
          b.key_concurrency
        ) end as value
      ) lim
      where k.queue = b.queue and k.ready_at <= now()
        and (lim.value is null or coalesce(l.n, 0) < lim.value)
      order by k.head_priority, k.served, k.id
      limit b.budget
    ) k
    where b.budget > 0
  ),
  candidates as (
    select la.*, t.id, t.priority, t.run_at,
           row_number() over (partition by la.key_id order by t.priority, t.run_at, t.id) as place
    from lanes la
    cross join lateral (
      select t.id, t.priority, t.run_at from sluice.tasks t
      where t.status = 'pending' and t.queue = la.queue and t.lane = la.lane
        and t.run_at <= now() and (t.expires_at is null or t.expires_at > now())
      order by t.priority, t.run_at, t.id
      limit least(la.room, la.budget)
    ) t
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
  claimed as (
    update sluice.tasks t
    set status = 'leased',
        lease_id = gen_random_uuid(),
        leased_at = now(),
        lease_expires_at = now() + make_interval(secs => t.lease_ms / 1000.0),
        attempts = t.attempts + 1,
        updated_at = now()
    from chosen
    where t.id = chosen.id and t.status = 'pending'
    returning t.*
  )
  select (select array_agg(c) from claimed c),
         (select array_agg(distinct key_id) from lanes),
         (select array_agg(key_id order by first_turn) from (select key_id, min(overall) as first_turn from chosen group by key_id) s),
         exists (select 1 from lanes la where not exists (select 1 from candidates c where c.key_id = la.key_id))
  into v_claimed, v_examined, v_served, v_stale;

  -- The examined lanes get exact hints (their snapshot includes this claim's leases; an
  -- enqueue racing for a lane waits for the row lock and lowers the hint again), and the
  -- served ones the next round-robin marks, in the order they were served.
  perform sluice.keys_recompute(coalesce(v_examined, '{}'));
  if v_served is not null then
    v_pass := nextval('sluice.claim_pass');
    update sluice.keys k set served = v_pass * 10000 + s.ord
    from unnest(v_served) with ordinality as s(id, ord)
    where k.id = s.id;
  end if;

  v_all := v_all || coalesce(v_claimed, '{}');
  v_want := p_max - cardinality(v_all);
  exit when not v_stale or v_want <= 0 or v_round >= 4;
  end loop;

  return query select * from unnest(v_all);
end $$;
