-- When an enqueue or a claim last touched a lane (functions/claim.sql: lanes_touch, lanes_recompute),
-- so that the sweep deletes only the lanes of keys that have been idle for a while
-- (`sluice.lanes_sweep`): a key that comes back within it keeps its lane, its round-robin turn
-- and its row, instead of a delete and an insert each time it goes quiet between two tasks.
-- A constant default: no table rewrite; lanes that exist now count as touched now.
alter table sluice.lanes add column touched_at timestamptz not null default now();
