-- Database functions now live in migrations/functions/, re-applied when they change. The claim
-- and keys_recompute gain a last parameter (the clock, default the database's); a call without
-- it still resolves to them, so dispatchers running the old code keep working during a deploy.
-- The old signatures go here; migrations/functions/claim.sql creates the new ones right after.
drop function sluice.claim(integer, integer, jsonb);
drop function sluice.keys_recompute(bigint[]);
