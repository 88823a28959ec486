-- A claim pass looks for waiting tasks whose children have all finished (claim.sql): through
-- the unfinished children only, not every child ever retained (0012's tasks_parent, kept for
-- listing a task's children and for the parent's foreign key).
create index tasks_parent_open on sluice.tasks (parent_id) where status in ('pending', 'leased', 'waiting');
