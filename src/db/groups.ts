/**
 * Endpoint groups (migrations/0025_groups.sql): a name for a list of URLs, which an enqueue
 * naming the group turns into one task per URL (src/api/groups.ts).
 */
import type { Queryable } from './db.ts';

export interface Group {
  name: string;
  /** As the target check wrote them when the group was put. */
  urls: string[];
  createdAt: Date;
  updatedAt: Date;
}

interface GroupRow {
  name: string;
  urls: string[];
  created_at: Date;
  updated_at: Date;
}

const toGroup = (row: GroupRow): Group => ({ name: row.name, urls: row.urls, createdAt: row.created_at, updatedAt: row.updated_at });

/** Creates the group, or replaces its URLs; returns it, and whether it is new. */
export async function groupPut(db: Queryable, name: string, urls: readonly string[]): Promise<{ group: Group; created: boolean }> {
  const [row] = await db.query<GroupRow & { created: boolean }>(
    `insert into sluice.groups (name, urls) values ($1, $2::text[])
     on conflict (name) do update set urls = excluded.urls, updated_at = now()
     returning *, (xmax = 0) as created`,
    [name, urls],
  );
  return { group: toGroup(row!), created: row!.created };
}

export async function groupGet(db: Queryable, name: string): Promise<Group | null> {
  const [row] = await db.query<GroupRow>('select * from sluice.groups where name = $1', [name]);
  return row ? toGroup(row) : null;
}

/** The groups of these names that exist, by name. */
export async function groupsNamed(db: Queryable, names: readonly string[]): Promise<Map<string, Group>> {
  const rows = await db.query<GroupRow>('select * from sluice.groups where name = any($1::text[])', [names]);
  return new Map(rows.map((r) => [r.name, toGroup(r)]));
}

/** By name, after `afterName` when given. */
export async function groupList(db: Queryable, options: { afterName?: string | undefined; limit: number }): Promise<Group[]> {
  const rows = await db.query<GroupRow>('select * from sluice.groups where ($1::text is null or name > $1) order by name limit $2', [
    options.afterName ?? null,
    options.limit,
  ]);
  return rows.map(toGroup);
}

/** Deletes a group; returns whether there was one. Tasks it made are left alone. */
export async function groupDelete(db: Queryable, name: string): Promise<boolean> {
  return (await db.query('delete from sluice.groups where name = $1 returning name', [name])).length > 0;
}
