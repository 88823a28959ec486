-- Retention (DESIGN.md §6): finished tasks are deleted once older than SLUICE_RETENTION, in small
-- batches by the dispatcher, so that a long-lived system stays as small as a new one. Their
-- attempt rows go with them (on delete cascade). This index finds the oldest finished tasks.
create index tasks_finished on sluice.tasks (finished_at) where finished_at is not null;
