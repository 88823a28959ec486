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
    (select k.task_limit from sluice.keys k where k.queue = p_queue and k.lane = p_lane),
    (select (q.options ->> 'key_concurrency')::integer from sluice.queues q where q.name = p_queue),
    (p_queues -> p_queue ->> 'key_concurrency')::integer
  ) end
$$;

-- The holder of lease p_lease on task p_task waits for its children p_children (null = all).
-- Under the claim's lock, so that what is lent and counted cannot change meanwhile. Answers:
--   {"status": "waiting", "waiting_on": [...], "lent_queue": b, "lent_key": b}
--   {"error": "lease_lost"}                          the lease is not held (expired, ended)
--   {"error": "not_children", "ids": [...]}          ids that are not this task's children
--   {"error": "recursive_wait_deadlock", "level": "queue"|"key", "queue", "key", "limit",
--    "chain": [{"id", "queue", "key"}, ...]}         the wait could never be served: the
--      waiter and the tasks waiting on it hold every slot a child needs, and none of them can
--      end before that child does.
-- A waiter lends its queue slot when a child is on its queue, and its key slot when a child is
-- on its queue and key, while fewer than the level's limit are lent there.
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
  v_stuck record;
  v_kids jsonb;
begin
  perform pg_advisory_xact_lock(7215530002);
  select * into w from sluice.tasks
  where id = p_task and lease_id = p_lease and status = 'leased' and lease_expires_at > clock_timestamp()
  for update;
  if not found then
    return jsonb_build_object('error', 'lease_lost');
  end if;

  if p_children is not null then
    select array_agg(x order by x) into v_bad from unnest(p_children) x
    where not exists (select 1 from sluice.tasks c where c.id = x and c.parent_id = p_task);
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

  -- The chain: the waiter, then each task waiting on the one before (up to 100 deep).
  -- A child needs a slot at its queue (and key); chain members there that did not lend it hold
  -- it until the child ends. As many as the limit: the child can never run.
  with recursive chain(id, queue, lane, parent_id, lent_queue, lent_key, depth) as (
    select w.id, w.queue, w.lane, w.parent_id, v_lend_queue, v_lend_key, 1
    union all
    select p.id, p.queue, p.lane, p.parent_id, p.lent_queue, p.lent_key, c.depth + 1
    from chain c join sluice.tasks p on p.id = c.parent_id
    where p.status = 'waiting' and (p.waiting_on is null or c.id = any(p.waiting_on)) and c.depth < 100
  ),
  needs as (
    select distinct 'queue' as level, c.queue, null::text as lane, sluice.queue_limit(c.queue, p_queues) as lim
    from jsonb_to_recordset(v_kids) as c(id bigint, queue text, lane text)
    union
    select distinct 'key', c.queue, c.lane, sluice.lane_limit(c.queue, c.lane, p_queues)
    from jsonb_to_recordset(v_kids) as c(id bigint, queue text, lane text) where c.lane <> ''
  )
  select n.level, n.queue, n.lane, n.lim,
         (select jsonb_agg(jsonb_build_object('id', ch.id::text, 'queue', ch.queue,
                                              'key', case when ch.lane = '' then null else substr(ch.lane, 3) end) order by ch.depth)
          from chain ch) as chain
  into v_stuck
  from needs n
  where n.lim is not null and n.lim <= (
    select count(*) from chain ch
    where ch.queue = n.queue
      and case when n.level = 'queue' then not ch.lent_queue else ch.lane = n.lane and not ch.lent_key end
  )
  order by n.level desc, n.queue, n.lane
  limit 1;
  if found then
    return jsonb_build_object('error', 'recursive_wait_deadlock', 'level', v_stuck.level, 'queue', v_stuck.queue,
                              'key', case when v_stuck.lane is null or v_stuck.lane = '' then null else substr(v_stuck.lane, 3) end,
                              'limit', v_stuck.lim, 'chain', v_stuck.chain);
  end if;

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
  insert into sluice.attempts (task_id, attempt, lease_id, started_at, outcome, duration_ms)
  values (p_task, w.attempts, p_lease, w.leased_at, 'waiting', (extract(epoch from now() - w.leased_at) * 1000)::integer)
  on conflict (task_id, lease_id) do nothing;
  return jsonb_build_object('status', 'waiting', 'waiting_on', coalesce(to_jsonb(v_open), '[]'::jsonb),
                            'lent_queue', v_lend_queue, 'lent_key', v_lend_key);
end $$;
