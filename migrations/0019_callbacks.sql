-- Callbacks (docs/guide.md#callbacks): a task may name a URL to be told when it succeeds and
-- one for when it goes dead. What it named, resolved at enqueue with the retry settings of the
-- queue `callbacks` (src/api/schemas.ts), is kept in `callback`:
--   {"url": text | null, "failure_url": text | null, "max_attempts", "backoff_initial_ms",
--    "backoff_max_ms", "backoff_factor", "backoff_jitter", "timeout_ms", "lease_ms"}
-- and moves to history with the task. When a task finishes that way, the trigger of
-- functions/callbacks.sql enqueues the notification in the same transaction.
alter table sluice.tasks add column callback jsonb;
alter table sluice.finished add column callback jsonb;

-- Reads see it, live or finished (the view of 0014_history.sql, one column more at its end).
create or replace view sluice.all_tasks as
  select id, queue, status, url, method, headers, body, content_type, concurrency_key, concurrency_limit, priority, run_at,
         expires_at, attempts, max_attempts, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, deferrals, timeout_ms, lease_ms, dedup_key, lease_id, leased_at,
         lease_expires_at, cancel_requested_at, result, last_error, last_status, created_at, updated_at, finished_at, lane,
         last_lease_id, schedule, schedule_slot, rate_limit, rate_period_ms, parent_id, waiting_on, lent_queue, lent_key, resumes, callback
  from sluice.tasks
  union all
  select id, queue, status, url, method, headers, body, content_type, concurrency_key, concurrency_limit, priority, run_at,
         expires_at, attempts, max_attempts, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, deferrals, timeout_ms, lease_ms, dedup_key, null::uuid, null::timestamptz,
         null::timestamptz, cancel_requested_at, result, last_error, last_status, created_at, finished_at, finished_at,
         case when concurrency_key is null then '' else 'k:' || concurrency_key end,
         last_lease_id, schedule, schedule_slot, rate_limit, rate_period_ms, parent_id, null::bigint[], false, false, resumes, callback
  from sluice.finished;
