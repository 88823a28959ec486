/**
 * What a database has been sent, read on Postgres's side: the statements run on it
 * (`pg_stat_statements`, loaded by the test Postgres and counted in shared memory as each ends)
 * and its sessions (`pg_stat_activity`). Read over a connection to another database, so that
 * the reading is not counted. Two equal readings: nothing was sent between them, and no
 * connection that stays open was made.
 */
import pg from 'pg';
import { inject } from 'vitest';

export interface Activity {
  statements: number;
  sessions: number[];
}

export interface ActivityProbe {
  read(): Promise<Activity>;
  close(): Promise<void>;
}

export async function databaseActivity(databaseUrl: string): Promise<ActivityProbe> {
  const name = new URL(databaseUrl).pathname.slice(1);
  const admin = new pg.Client(inject('pgAdminUrl'));
  await admin.connect();
  return {
    async read() {
      const [statements, sessions] = await Promise.all([
        admin.query<{ calls: string }>(
          `select coalesce(sum(s.calls), 0)::text as calls
           from pg_stat_statements s join pg_database d on d.oid = s.dbid where d.datname = $1`,
          [name],
        ),
        admin.query<{ pid: number }>('select pid from pg_stat_activity where datname = $1 order by pid', [name]),
      ]);
      return { statements: Number(statements.rows[0]!.calls), sessions: sessions.rows.map((r) => r.pid) };
    },
    close: () => admin.end(),
  };
}
