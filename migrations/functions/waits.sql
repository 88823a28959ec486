-- Waits on child tasks (0012_waits.sql): the decision to wait, in one place. The claim
-- (claim.sql) counts waiting tasks and resumes them; this file decides whether a wait can ever
-- be served, and what the waiter lends.

-- A queue's concurrency limit in force: the run-time override, else the environment's
-- (p_queues, as the claim takes it); null = none. The claim applies the same precedence inline.
create or replace function sluice.queue_limit(p_queue text, p_queues jsonb) returns integer
language sql stable as $$
  select coalesce((select (q.options ->> 'concurrency')::integer from sluice.queues q where q.name = p_queue),
                  (p_queues -> p_queue ->> 'concurrency')::integer)
$$;

-- A lane's key limit in force: the key's override, else its first task's, else the queue's
-- key_concurrency; null for the keyless lane or when none is set.
create or replace function sluice.lane_limit(p_queue text, p_lane text, p_queues jsonb) returns integer
language sql stable as $$
  select case when p_lane = '' then null else coalesce(
    (select kl."limit" from sluice.key_limits kl where kl.queue = p_queue and kl.concurrency_key = substr(p_lane, 3)),
    (select k.task_limit from sluice.lanes k where k.queue = p_queue and k.lane = p_lane),
    (select (q.options ->> 'key_concurrency')::integer from sluice.queues q where q.name = p_queue),
    (p_queues -> p_queue ->> 'key_concurrency')::integer
  ) end
$$;

-- The holder of lease p_lease on task p_task waits for its children p_children (null = all).
-- Under the claim's lock, so that what is lent and counted cannot change meanwhile. Answers:
--   {"status": "waiting", "waiting_on": [...], "lent_queue": b, "lent_key": b}
--   {"error": "lease_lost"}                          the lease is not held (expired, ended)
--   {"error": "cancelled"}                           a cancel was asked for: end the lease instead
--   {"error": "not_children", "ids": [...]}          ids that are not this task's children
--   {"error": "recursive_wait_deadlock", "level": "queue"|"key", "queue", "key", "limit",
--    "chain": [{"id", "queue", "key"}, ...]}         the wait could never be served.
-- A waiter lends its queue slot when a child is on its queue, and its key slot when a child is
-- on its queue and key, while fewer than the level's limit are lent there.
--
-- Never served: waiting tasks that can only go on once others have. A waiting task X depends on
-- each child it waits for: on a waiting child itself, and on a pending child's way to a slot. A
-- level (a queue, or a key of a queue) whose limit is all held by waiting tasks that did not lend
-- it is shut until one of them ends, so a pending child needing it depends on every one of them.
-- (A level held by a leased task is not: leases end.) The wait is made, and undone if its waiter
-- now depends on itself: a cycle, whose tasks can never end. The chain named is that cycle.
create or replace function sluice.lease_wait(p_task bigint, p_lease uuid, p_children bigint[], p_queues jsonb)
returns jsonb
language plpgsql volatile as $$
declare
  w sluice.tasks;
  v_bad bigint[];
  v_open bigint[];
  v_limit integer;
  v_lend_queue boolean;
  v_lend_key boolean;
  v_kids jsonb;
  v_cycle bigint[];
  v_shut record;
begin
  perform sluice.claim_lock();
  -- Locked as an update locks it: a settle, heartbeat or cancel of this lease waits for the wait.
  -- Found by its id: the status is checked row by row (`is not distinct from`, as src/db/rows.ts
  -- `stillLeased` says why), so that no plan reads the index of every lease instead.
  select * into w from sluice.tasks
  where id = p_task and lease_id = p_lease and status is not distinct from 'leased' and lease_expires_at > clock_timestamp()
  for no key update;
  if not found then
    return jsonb_build_object('error', 'lease_lost');
  end if;
  if w.cancel_requested_at is not null then
    return jsonb_build_object('error', 'cancelled');
  end if;

  if p_children is not null then
    select array_agg(x order by x) into v_bad from unnest(p_children) x
    where not exists (select 1 from sluice.all_tasks c where c.id = x and c.parent_id = p_task);
    if v_bad is not null then
      return jsonb_build_object('error', 'not_children', 'ids', to_jsonb(v_bad));
    end if;
  end if;

  -- The children it will wait for: those not finished.
  select coalesce(jsonb_agg(jsonb_build_object('id', c.id, 'queue', c.queue, 'lane', c.lane) order by c.id), '[]'), array_agg(c.id order by c.id)
  into v_kids, v_open
  from sluice.tasks c
  where c.parent_id = p_task and c.status in ('pending', 'leased', 'waiting')
    and (p_children is null or c.id = any(p_children));

  v_limit := sluice.queue_limit(w.queue, p_queues);
  v_lend_queue := v_limit is not null
    and exists (select 1 from jsonb_to_recordset(v_kids) as c(id bigint, queue text, lane text) where c.queue = w.queue)
    and (select count(*) from sluice.tasks t where t.status = 'waiting' and t.lent_queue and t.queue = w.queue) < v_limit;
  v_limit := sluice.lane_limit(w.queue, w.lane, p_queues);
  v_lend_key := v_limit is not null
    and exists (select 1 from jsonb_to_recordset(v_kids) as c(id bigint, queue text, lane text) where c.queue = w.queue and c.lane = w.lane)
    and (select count(*) from sluice.tasks t where t.status = 'waiting' and t.lent_key and t.queue = w.queue and t.lane = w.lane) < v_limit;

  begin
    update sluice.tasks
    set status = 'waiting',
        last_lease_id = lease_id,
        lease_id = null,
        leased_at = null,
        lease_expires_at = null,
        -- A resume is not a retry: the attempt is given back, as a release gives it back.
        attempts = attempts - 1,
        resumes = resumes + 1,
        waiting_on = p_children,
        lent_queue = v_lend_queue,
        lent_key = v_lend_key,
        -- It has started: "not started after" no longer applies.
        expires_at = null,
        updated_at = now()
    where id = p_task;

    with recursive
    -- Levels shut: every slot held by a waiting task that did not lend it.
    shut_queues as (
      select queue from sluice.tasks where status = 'waiting' and not lent_queue
      group by queue having count(*) >= coalesce(sluice.queue_limit(queue, p_queues), 2147483647)
    ),
    shut_lanes as (
      select queue, lane from sluice.tasks where status = 'waiting' and not lent_key and lane <> ''
      group by queue, lane having count(*) >= coalesce(sluice.lane_limit(queue, lane, p_queues), 2147483647)
    ),
    -- X depends on Y.
    depends(x, y) as (
      select p.id, c.id from sluice.tasks p join sluice.tasks c on c.parent_id = p.id
      where p.status = 'waiting' and c.status = 'waiting' and (p.waiting_on is null or c.id = any(p.waiting_on))
      union
      select p.id, h.id from sluice.tasks p
      join sluice.tasks c on c.parent_id = p.id and c.status = 'pending' and (p.waiting_on is null or c.id = any(p.waiting_on))
      join sluice.tasks h on h.status = 'waiting' and h.queue = c.queue
        and ((not h.lent_queue and c.queue in (select queue from shut_queues))
             or (not h.lent_key and h.lane = c.lane and (c.queue, c.lane) in (select queue, lane from shut_lanes)))
      where p.status = 'waiting'
    ),
    reach(id, path) as (
      select d.y, array[p_task, d.y] from depends d where d.x = p_task
      union all
      select d.y, r.path || d.y from reach r join depends d on d.x = r.id
      where r.id <> p_task and not d.y = any(r.path[2:]) and cardinality(r.path) < 100
    )
    select path[1:cardinality(path) - 1] into v_cycle from reach where id = p_task order by cardinality(path) limit 1;

    if v_cycle is not null then
      -- The level to name: the first one a child of the waiter needs that the wait left shut.
      select l.level, l.queue, l.lane, l.lim into v_shut from (
        select 'queue' as level, c.queue, null::text as lane, sluice.queue_limit(c.queue, p_queues) as lim,
               (select count(*) from sluice.tasks h where h.status = 'waiting' and not h.lent_queue and h.queue = c.queue) as held
        from jsonb_to_recordset(v_kids) as c(id bigint, queue text, lane text)
        union
        select 'key', c.queue, c.lane, sluice.lane_limit(c.queue, c.lane, p_queues),
               (select count(*) from sluice.tasks h where h.status = 'waiting' and not h.lent_key and h.queue = c.queue and h.lane = c.lane)
        from jsonb_to_recordset(v_kids) as c(id bigint, queue text, lane text) where c.lane <> ''
      ) l
      where l.lim is not null and l.held >= l.lim
      order by l.level desc, l.queue, l.lane
      limit 1;
      raise exception using errcode = 'SLW01', message = 'the wait would close a cycle';
    end if;
  exception when sqlstate 'SLW01' then
    -- Undone (local variables keep what they were given).
    return jsonb_build_object(
      'error', 'recursive_wait_deadlock', 'level', coalesce(v_shut.level, 'queue'), 'queue', coalesce(v_shut.queue, w.queue),
      'key', case when v_shut.lane is null or v_shut.lane = '' then null else substr(v_shut.lane, 3) end,
      'limit', v_shut.lim,
      'chain', (select jsonb_agg(jsonb_build_object('id', t.id::text, 'queue', t.queue,
                                                    'key', case when t.lane = '' then null else substr(t.lane, 3) end) order by o.ord)
                from unnest(v_cycle) with ordinality as o(id, ord) join sluice.tasks t on t.id = o.id));
  end;

  insert into sluice.attempts (task_id, attempt, lease_id, started_at, outcome, duration_ms)
  values (p_task, w.attempts, p_lease, w.leased_at, 'waiting', (extract(epoch from now() - w.leased_at) * 1000)::integer)
  on conflict (task_id, lease_id) do nothing;
  return jsonb_build_object('status', 'waiting', 'waiting_on', coalesce(to_jsonb(v_open), '[]'::jsonb),
                            'lent_queue', v_lend_queue, 'lent_key', v_lend_key);
end $$;
