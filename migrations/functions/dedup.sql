-- Dedup keys held after their task finished (0024_dedup_ttl.sql; src/db/dedup-ttl.ts): a
-- finished task with `dedup_ttl_ms` holds its key until that long after its `finished_at`.
--
-- sluice.dedup_first_bucket(): the lowest bucket of history that may hold such a task now: the
-- buckets made since 0024 (the older ones have no dedup index, and no task with a TTL), closed
-- less than the longest TTL (30 days) ago. Stable: a statement that says `bucket >=` it reads
-- only those partitions (pruned when it starts).
create or replace function sluice.dedup_first_bucket() returns bigint
language sql stable as $$
  select coalesce(min(bucket), (select max(bucket) from sluice.history_buckets))
  from sluice.history_buckets
  where dedup_indexed and (closed_at is null or closed_at > now() - interval '30 days')
$$;

-- sluice.dedup_held_finished(p_queues, p_keys): of the (queue, key) pairs given, those a finished
-- task holds now. Volatile, so its query reads with a snapshot of its own, taken when it runs,
-- not the calling statement's: an enqueue calls it once its insert is done, to find a task of
-- its key that finished while the insert ran. The insert's snapshot did not see that task's
-- history row, and its unfinished row, deleted by then, no longer stopped the insert.
create or replace function sluice.dedup_held_finished(p_queues text[], p_keys text[])
returns table (held_queue text, held_key text)
language plpgsql volatile as $$
begin
  if p_queues is null then
    return;
  end if;
  return query
    select k.queue, k.dedup_key
    from unnest(p_queues, p_keys) as k(queue, dedup_key)
    where exists (
      select 1 from sluice.finished f
      where f.queue = k.queue and f.dedup_key = k.dedup_key and f.dedup_ttl_ms is not null
        and f.finished_at > now() - make_interval(secs => f.dedup_ttl_ms / 1000.0)
        and f.bucket >= (select sluice.dedup_first_bucket()));
end $$;
