-- Callbacks (0019_callbacks.sql): when a task that named one succeeds (or goes dead), its
-- notification is enqueued in the transaction that finished it, whichever path finished it (a
-- push's settle, a lease call, the reaper), since every one of them moves the task to history
-- (src/db/history.ts `archiveCtes`). The notification is a task of the queue the callback names
-- (`callbacks`, src/api/schemas.ts; that name, should a callback lack it, since a failed insert here
-- would fail the task's own ending): pushed signed, retried by the settings resolved at enqueue,
-- limited as that queue is configured. It
-- names no callback of its own, so a callback never triggers one. Its body:
--   {"task_id", "queue", "status": "succeeded" | "dead", "attempts", "http_status", "result",
--    "error", "finished_at"}
-- `result` is what the endpoint answered (or the lease's `complete` gave), `error` the last one.
-- A row trigger whose WHEN skips every task without a callback: the settles of the others queue
-- no trigger event and copy no row (a statement trigger's transition table would copy them all).
create or replace function sluice.callbacks_enqueue() returns trigger
language plpgsql as $$
declare
  v_url text := case new.status when 'succeeded' then new.callback ->> 'url' when 'dead' then new.callback ->> 'failure_url' end;
begin
  if v_url is null then
    return null;
  end if;
  insert into sluice.tasks (queue, url, body, max_attempts, backoff_initial_ms, backoff_max_ms, backoff_factor,
    backoff_jitter, timeout_ms, lease_ms)
  values (coalesce(new.callback ->> 'queue', 'callbacks'), v_url,
          jsonb_build_object('task_id', new.id::text, 'queue', new.queue, 'status', new.status, 'attempts', new.attempts,
                             'http_status', new.last_status, 'result', new.result, 'error', new.last_error,
                             -- As the API writes times: UTC, milliseconds, Z.
                             'finished_at', to_char(new.finished_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))::text,
          (new.callback ->> 'max_attempts')::integer, (new.callback ->> 'backoff_initial_ms')::integer,
          (new.callback ->> 'backoff_max_ms')::integer, (new.callback ->> 'backoff_factor')::float8,
          (new.callback ->> 'backoff_jitter')::float8, (new.callback ->> 'timeout_ms')::integer, (new.callback ->> 'lease_ms')::integer);
  return null;
end $$;

-- On the partitioned table: cloned onto every bucket, those attached later included.
drop trigger if exists finished_callbacks on sluice.finished;
create trigger finished_callbacks after insert on sluice.finished
  for each row when (new.callback is not null) execute function sluice.callbacks_enqueue();
