-- What a level has learnt from its endpoint (docs/DESIGN.md §5, "Backpressure"): a queue (lane
-- '*') or one lane of it ('k:<key>'), with
--   * `effective`: the limit an adaptive queue has come to (AIMD), at most its configured limit
--     where it has one; null = not lowered yet (the configured limit holds);
--   * `successes`: pushes answered 2xx since `effective` last moved (a window of them adds one);
--   * `decreased_at`: when it was last lowered; an overload from a lease that began before then
--     was in flight under the old limit and does not lower it again;
--   * `held_until`: a Retry-After from one of its tasks holds the whole level until then, on
--     any queue (adaptive or not);
--   * `reason`, `moved_at`: why and when `effective` or `held_until` last moved, to be shown.
-- The settle (src/db/settle.ts) writes a row when a push's answer moves it; the claim
-- (functions/claim.sql) reads it under the claim's lock, so every dispatcher, on either path,
-- uses the same effective limit and the same hold.
create table sluice.levels (
  queue        text not null,
  lane         text not null,
  effective    integer check (effective >= 1),
  successes    integer not null default 0,
  decreased_at timestamptz,
  held_until   timestamptz,
  reason       text,
  moved_at     timestamptz,
  primary key (queue, lane)
);

-- The next end of a hold, for the dispatcher's next wake-up (src/db/due.ts).
create index levels_held on sluice.levels (held_until) where held_until is not null;
