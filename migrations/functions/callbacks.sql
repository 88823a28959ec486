-- Callbacks (0019_callbacks.sql): when a task that named one succeeds (or goes dead), its
-- notification is enqueued in the transaction that finished it, whichever path finished it (a
-- push's settle, a lease call, the reaper), since every one of them moves the task to history
-- (src/db/history.ts `archiveCtes`). The notification is a task of the queue `callbacks`: pushed
-- signed, retried by the settings resolved at enqueue, limited as that queue is configured. It
-- names no callback of its own, so a callback never triggers one. Its body:
--   {"task_id", "queue", "status": "succeeded" | "dead", "attempts", "http_status", "result",
--    "error", "finished_at"}
-- `result` is what the endpoint answered (or the lease's `complete` gave), `error` the last one.
create or replace function sluice.callbacks_enqueue() returns trigger
language plpgsql as $$
begin
  insert into sluice.tasks (queue, url, body, max_attempts, backoff_initial_ms, backoff_max_ms, backoff_factor,
    backoff_jitter, timeout_ms, lease_ms)
  select 'callbacks', c.url,
         jsonb_build_object('task_id', f.id::text, 'queue', f.queue, 'status', f.status, 'attempts', f.attempts,
                            'http_status', f.last_status, 'result', f.result, 'error', f.last_error,
                            'finished_at', f.finished_at)::text,
         (f.callback ->> 'max_attempts')::integer, (f.callback ->> 'backoff_initial_ms')::integer,
         (f.callback ->> 'backoff_max_ms')::integer, (f.callback ->> 'backoff_factor')::float8,
         (f.callback ->> 'backoff_jitter')::float8, (f.callback ->> 'timeout_ms')::integer, (f.callback ->> 'lease_ms')::integer
  from finished_now f
  cross join lateral (
    select case f.status when 'succeeded' then f.callback ->> 'url' when 'dead' then f.callback ->> 'failure_url' end as url
  ) c
  where f.callback is not null and c.url is not null
  order by f.id;
  return null;
end $$;

drop trigger if exists finished_callbacks on sluice.finished;
create trigger finished_callbacks after insert on sluice.finished
  referencing new table as finished_now for each statement execute function sluice.callbacks_enqueue();
