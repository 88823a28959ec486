/**
 * The claim's plans against the statistics they were made from. A session plans the claim once
 * (generic plans, migrations/functions/claim.sql) and keeps the plans until the tables' statistics
 * change. Planned while the task table was empty (a vacuum had just cut it to no pages), a plan
 * read the whole table for every lane it looked at: in a keyed run at 500 tasks/s each pass then
 * grew from a few ms to 30–45 ms as the table filled again, until the next autovacuum made new
 * plans (docs/operations.md, "Storage"). No pass may scan the task or lane tables whole, whatever
 * they held when it was planned.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { taskClaimBatch } from '../../src/db/claim.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { leaseEnding, leaseSettleMany } from '../../src/db/settle.ts';
import { openPgDb } from '../../src/node/pg-db.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { newTask } from '../helpers/tasks.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(() => t.drop());

/** Sequential scans of the tables a claim pass reads, made by one pass in `session`. */
async function seqScansOfOnePass(session: pg.Client, max: number): Promise<{ claimed: number; scans: Record<string, number> }> {
  await session.query('begin');
  try {
    const { rows } = await session.query<{ n: number }>(`select count(*)::int as n from sluice.claim($1, null, '{}'::jsonb)`, [max]);
    // This transaction's own counts, not yet reported: exactly what the pass did.
    const scans = await session.query<{ relname: string; seq_scan: string }>(
      `select relname, seq_scan from pg_stat_xact_user_tables where schemaname = 'sluice' and relname in ('tasks', 'lanes')`,
    );
    return { claimed: rows[0]!.n, scans: Object.fromEntries(scans.rows.map((r) => [r.relname, Number(r.seq_scan)])) };
  } finally {
    await session.query('rollback');
  }
}

describe('the claim after its tables were empty when it was planned', () => {
  it('finds its tasks and lanes through their indexes, not by reading the tables whole', async () => {
    // Empty and vacuumed: the statistics say "no pages, no rows", as after a vacuum that truncated.
    await t.db.query('vacuum (analyze) sluice.tasks');
    await t.db.query('vacuum (analyze) sluice.lanes');
    const session = new pg.Client(t.url);
    await session.connect();
    try {
      // The session plans the claim now, on the empty tables.
      expect((await seqScansOfOnePass(session, 10)).claimed).toBe(0);

      // Then the tables fill up, without new statistics: 40 keys of at most 2, 50 tasks each,
      // one of each key leased by another session (its leases count against each key).
      await taskInsertMany(
        t.db,
        Array.from({ length: 2_000 }, (_, i) => newTask({ queue: 'plans', concurrencyKey: `k${i % 40}`, concurrencyLimit: 2 })),
      );
      await t.db.query(`select count(*) from sluice.claim(40, null, '{}'::jsonb)`);

      const pass = await seqScansOfOnePass(session, 40);
      expect(pass.claimed).toBe(40);
      expect(pass.scans).toEqual({ tasks: 0, lanes: 0 });
    } finally {
      await session.end();
    }
  });
});

describe('the settle after a vacuum found the task table empty', () => {
  it('finds its leases by their ids, not by reading the table whole', async () => {
    // A table that had rows, all gone at the vacuum: its pages stay (migrations/0021), so its
    // statistics never say "no pages".
    await taskInsertMany(
      t.db,
      Array.from({ length: 2_000 }, () => newTask({ queue: 'plans-settle' })),
    );
    await t.db.query('delete from sluice.tasks');
    await t.db.query('vacuum (analyze) sluice.tasks');
    // One connection: its prepared settle turns generic after five runs, planned now.
    const one = openPgDb(t.url, 1);
    try {
      const gone = { id: '1', attempts: 1, lease: { id: crypto.randomUUID(), leasedAt: new Date(), expiresAt: new Date() } };
      for (let i = 0; i < 8; i++) {
        await leaseSettleMany(one, [leaseEnding(gone, { status: 'succeeded', result: null, httpStatus: 200 }, 1)]);
      }
      await taskInsertMany(
        t.db,
        Array.from({ length: 2_000 }, () => newTask({ queue: 'plans-settle' })),
      );
      const leased = await taskClaimBatch(t.db, { max: 20, clusterCap: null, queuesJson: '{}' });
      expect(leased).toHaveLength(20);
      const { held, scans } = await one.transaction(async (tx) => {
        const held = await leaseSettleMany(
          tx,
          leased.map((task) => leaseEnding(task, { status: 'succeeded', result: null, httpStatus: 200 }, 1)),
        );
        const rows = await tx.query<{ seq_scan: string }>(
          `select seq_scan from pg_stat_xact_user_tables where schemaname = 'sluice' and relname = 'tasks'`,
        );
        return { held, scans: Number(rows[0]?.seq_scan ?? 0) };
      });
      expect(held.size).toBe(20);
      expect(scans).toBe(0);
    } finally {
      await one.close();
    }
  });
});
