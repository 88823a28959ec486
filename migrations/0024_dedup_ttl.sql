-- Idempotency keys that outlive completion (docs/guide.md "Deduplication", docs/DESIGN.md §2 and
-- §10): a task enqueued with `dedup_ttl_ms` keeps its dedup key for that long after it finishes,
-- measured from its `finished_at` on the database's clock; an enqueue with that key meanwhile
-- answers with it. Its record is its own history row, kept in the buckets retention drops whole
-- (the API refuses a TTL longer than the retention window): nothing else to write, nothing to
-- delete. Tasks without a TTL add no index entry.
--
-- numeric, not bigint: the column comes last in the row, after the text a claim never changes,
-- and a bigint is aligned to 8 bytes. A claim changes the length of what comes before (status,
-- lease), so the padding before an aligned last column changes too, and the unchanged end of
-- the row no longer matches byte for byte: the claim's WAL record would carry the row's whole
-- text again (84 bytes a task more, bench/wal.ts). A short numeric is stored unaligned.
alter table sluice.tasks add column dedup_ttl_ms numeric,
  add constraint tasks_dedup_ttl check (dedup_ttl_ms is null or (dedup_key is not null and dedup_ttl_ms between 1 and 2592000000));
alter table sluice.finished add column dedup_ttl_ms numeric;

-- The lookup, one index per bucket. Made on the parent only, so that no bucket of history is
-- read to build it (a bucket holds up to an eighth of the window: minutes of a lock that stops
-- every settle); each bucket attached from now on gets its own (attaching builds it, on an empty
-- table). The buckets that have it are marked, and the lookups read only those
-- (src/db/dedup-ttl.ts): the older ones hold no task with a TTL.
create index finished_dedup on only sluice.finished (queue, dedup_key) where dedup_ttl_ms is not null;
alter table sluice.history_buckets add column dedup_indexed boolean not null default false;
alter table sluice.history_buckets alter column dedup_indexed set default true;

-- The open bucket: an empty one gets the index now; one that holds tasks is closed, and a new
-- one opened (as sluice.history_sweep opens one). This statement holds sluice.finished since the
-- `alter table` above, so no task lands in it meanwhile.
do $$
declare
  v_open bigint := (select max(bucket) from sluice.history_buckets);
begin
  if exists (select 1 from sluice.finished where bucket = v_open) then
    execute format('create table sluice.%I (like sluice.finished including defaults including constraints)', 'finished_' || (v_open + 1));
    execute format('alter table sluice.finished attach partition sluice.%I for values in (%s)', 'finished_' || (v_open + 1), v_open + 1);
    update sluice.history_buckets set closed_at = clock_timestamp() where bucket = v_open;
    insert into sluice.history_buckets (bucket, opened_at) values (v_open + 1, clock_timestamp());
  else
    execute format('create index %I on sluice.%I (queue, dedup_key) where dedup_ttl_ms is not null',
      'finished_' || v_open || '_dedup', 'finished_' || v_open);
    execute format('alter index sluice.finished_dedup attach partition sluice.%I', 'finished_' || v_open || '_dedup');
    update sluice.history_buckets set dedup_indexed = true where bucket = v_open;
  end if;
end $$;

-- Reads see it, live or finished (the view of 0019_callbacks.sql, one column more at its end).
create or replace view sluice.all_tasks as
  select id, queue, status, url, method, headers, body, content_type, concurrency_key, concurrency_limit, priority, run_at,
         expires_at, attempts, max_attempts, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, deferrals, timeout_ms, lease_ms, dedup_key, lease_id, leased_at,
         lease_expires_at, cancel_requested_at, result, last_error, last_status, created_at, updated_at, finished_at, lane,
         last_lease_id, schedule, schedule_slot, rate_limit, rate_period_ms, parent_id, waiting_on, lent_queue, lent_key, resumes, callback,
         dedup_ttl_ms
  from sluice.tasks
  union all
  select id, queue, status, url, method, headers, body, content_type, concurrency_key, concurrency_limit, priority, run_at,
         expires_at, attempts, max_attempts, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, deferrals, timeout_ms, lease_ms, dedup_key, null::uuid, null::timestamptz,
         null::timestamptz, cancel_requested_at, result, last_error, last_status, created_at, finished_at, finished_at,
         case when concurrency_key is null then '' else 'k:' || concurrency_key end,
         last_lease_id, schedule, schedule_slot, rate_limit, rate_period_ms, parent_id, null::bigint[], false, false, resumes, callback,
         dedup_ttl_ms
  from sluice.finished;
