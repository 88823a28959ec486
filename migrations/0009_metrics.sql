-- Metrics (GET /metrics). Counters live here, so they rise across restarts and Worker
-- invocations alike: a dispatcher adds what it counted in one statement per run (or per second
-- on Node), never one per task; the claim adds the passes it could not serve. A histogram is a
-- counter per bucket (`label` = its upper bound, not cumulative), plus `sum` and `count`.
create table sluice.counters (
  metric text not null,
  queue  text not null default '',
  label  text not null default '',
  value  double precision not null default 0,
  primary key (metric, queue, label)
);

-- Tasks per queue and status, counted now and then by a dispatcher (a minute's cron on the
-- Worker, a timer on Node), so that a scrape reads a few rows and never the tasks table.
create table sluice.task_counts (
  queue      text not null,
  status     text not null,
  n          bigint not null,
  counted_at timestamptz not null,
  primary key (queue, status)
);
