-- Pull queues (docs/guide.md#pull-consumers): a queue whose `pull` setting is true is consumed
-- by `POST /v1/queues/:queue/lease`, not pushed, and its tasks need no url. The setting lives
-- with the others (SLUICE_QUEUES, the run-time options of sluice.queues); the claim reads it
-- (migrations/functions/claim.sql). A task without a url keeps none, live or finished.
alter table sluice.tasks alter column url drop not null;
alter table sluice.finished alter column url drop not null;
