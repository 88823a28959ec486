-- Vacuum no longer cuts the live tables' empty tail pages off (the `vacuum_truncate` storage
-- parameter), so their statistics never say "no pages" while they run busy.
--
-- A queue's live tables empty out and fill again all the time: in a keyed run at 500 tasks/s,
-- every task finished and moved to history at one autovacuum, which cut `sluice.tasks` to no
-- pages. Plans made from those statistics (the settle's, prepared once per connection: generic
-- after five runs) read the table whole for what they look up by id or lane, and kept doing so
-- while it filled up again, until the next autovacuum a minute later (test/db/claim-plans.test.ts).
-- Truncating also takes an ACCESS EXCLUSIVE lock on the table, which every enqueue and claim
-- then queues behind. The pages kept are reused by the next rows; a table that grew in a burst
-- keeps its size on disk (VACUUM FULL gives it back, as docs/operations.md says).
alter table sluice.tasks set (vacuum_truncate = false);
alter table sluice.lanes set (vacuum_truncate = false);
