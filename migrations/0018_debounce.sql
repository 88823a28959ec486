-- Debounce (docs/guide.md "Debounce"): per queue and debounce key, the task later enqueues with
-- that key join, so that a burst of them runs once.
--   * trailing: the task waits; an enqueue while it is still pending replaces its body and moves
--     its due time to now + period_ms, never past `until` (its first enqueue + max_wait_ms);
--   * leading: the task runs at once; an enqueue before `until` (its first + period_ms) joins it
--     and pushes nothing.
-- A row is taken over by the next enqueue once its task is no longer pending (trailing) or its
-- period is over (leading); enqueues of one key are serialised by a transaction lock
-- (src/db/debounce.ts). The sweep deletes rows nothing can join any more.
create table sluice.debounces (
  queue    text not null,
  key      text not null,
  task_id  bigint not null,
  mode     text not null check (mode in ('trailing', 'leading')),
  first_at timestamptz not null,
  until    timestamptz not null,
  primary key (queue, key)
);
