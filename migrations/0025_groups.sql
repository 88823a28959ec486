-- Endpoint groups (docs/guide.md "Endpoint groups"; src/db/groups.ts): a name for a list of
-- URLs. An enqueue that names a group instead of a url becomes one task per URL, written in one
-- transaction; nothing about a task remembers the group (each is a task like any other).
-- Names follow the rules of queue names; each URL was checked as a task's url is when the group
-- was put, and is stored as that check wrote it.
create table sluice.groups (
  name       text primary key,
  urls       text[] not null check (cardinality(urls) between 1 and 100),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
