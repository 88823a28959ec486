-- A rate with `burst` (docs/guide.md "Rate limits"): a token bucket, kept as GCRA. Per queue
-- (lane '*') or lane, `tat` is the theoretical arrival time: with T = period_ms / limit and
-- τ = (burst − 1) · T, a claim at t may lease floor((t + τ + T − max(tat, t)) / T) tasks (burst
-- when the bucket has been idle), and moves tat on by T for each. `next_at` (tat − τ) is when
-- the next task may go, for the dispatcher's next wake-up (src/db/due.ts).
-- Only the claim writes these rows, under its lock (migrations/functions/claim.sql); a rate
-- without `burst` keeps its sliding window of grants (0011_rate_limits.sql).
create table sluice.rate_buckets (
  queue   text not null,
  lane    text not null,
  tat     timestamptz not null,
  next_at timestamptz not null,
  primary key (queue, lane)
);

create index rate_buckets_next on sluice.rate_buckets (next_at);
