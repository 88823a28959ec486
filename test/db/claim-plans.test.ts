/**
 * The claim's plans against the statistics they were made from. A session plans the claim once
 * (generic plans, migrations/functions/claim.sql) and keeps the plans until the tables' statistics
 * change. Planned while the task table was empty (after an autovacuum that found every task
 * finished), the plans read the whole table, or a whole index, for what they look up: in keyed
 * runs at 300-500 tasks/s each pass then grew from a few ms to 30–48 ms as the table filled
 * again, until the next autovacuum made new plans (docs/operations.md, "Storage";
 * migrations/0021 and 0022). No pass may read the task or lane tables, or their indexes, whole,
 * whatever they held when it was planned.
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

/** What one claim pass in `session` read: sequential scans, and index entries, of the task and lane tables. */
async function onePass(
  session: pg.Client,
  max: number,
  now: Date,
): Promise<{ claimed: number; seqScans: Record<string, number>; entriesRead: number; byIndex: Record<string, number> }> {
  await session.query('begin');
  try {
    const { rows } = await session.query<{ n: number }>(`select count(*)::int as n from sluice.claim($1, null, '{}'::jsonb, $2)`, [
      max,
      now,
    ]);
    // This transaction's own counts, not yet reported: exactly what the pass did.
    const tables = await session.query<{ relname: string; seq_scan: string }>(
      `select relname, seq_scan from pg_stat_xact_user_tables where schemaname = 'sluice' and relname in ('tasks', 'lanes')`,
    );
    const indexes = await session.query<{ name: string; read: number }>(
      `select i.indexrelid::regclass::text as name, pg_stat_get_xact_tuples_returned(i.indexrelid)::int as read
       from pg_index i where i.indrelid in ('sluice.tasks'::regclass, 'sluice.lanes'::regclass)`,
    );
    const byIndex = Object.fromEntries(indexes.rows.filter((r) => r.read > 0).map((r) => [r.name, r.read]));
    return {
      claimed: rows[0]!.n,
      seqScans: Object.fromEntries(tables.rows.map((r) => [r.relname, Number(r.seq_scan)])),
      entriesRead: indexes.rows.reduce((sum, r) => sum + r.read, 0),
      byIndex,
    };
  } finally {
    await session.query('rollback');
  }
}

describe('the claim, whatever its tables held when it was planned', () => {
  // Planned on empty, vacuumed tables ("no pages, no rows", as after an autovacuum that found
  // every task finished), or on the same tables full: either way a pass reads what it serves,
  // never the backlog.
  it.each(['empty', 'full'] as const)('planned on %s tables, reads its lanes and tasks through their indexes', async (when) => {
    const queue = `plans-${when}`;
    // 40 keys of at most 2 with 100 tasks each, and 10 keys whose tasks were delayed and came due
    // since (their lanes have no hint yet: the pass finds them through the delayed tasks' index).
    const fill = async () => {
      await taskInsertMany(
        t.db,
        Array.from({ length: 4_000 }, (_, i) => newTask({ queue, concurrencyKey: `k${i % 40}`, concurrencyLimit: 2 })),
      );
      await taskInsertMany(
        t.db,
        Array.from({ length: 200 }, (_, i) => newTask({ queue, concurrencyKey: `d${i % 10}`, concurrencyLimit: 2, delayMs: 30_000 })),
      );
    };
    await t.db.query('delete from sluice.tasks');
    await t.db.query('delete from sluice.lanes');
    if (when === 'full') await fill();
    await t.db.query('vacuum (analyze) sluice.tasks');
    await t.db.query('vacuum (analyze) sluice.lanes');
    const session = new pg.Client(t.url);
    await session.connect();
    try {
      // The session plans the claim now.
      await onePass(session, 10, new Date());
      if (when === 'empty') await fill();
      // One of each ready key leased by another session (its lease, a minute long, counts against the key).
      const now = new Date(Date.now() + 1_000);
      await taskClaimBatch(t.db, { max: 40, clusterCap: null, queuesJson: '{}', now });

      // The delayed tasks are due 45 s later; the leases still held.
      const pass = await onePass(session, 60, new Date(now.getTime() + 45_000));
      expect(pass.claimed).toBe(60);
      expect(pass.seqScans).toEqual({ tasks: 0, lanes: 0 });
      // 40 leases held, 50 lanes looked at, 200 tasks come due, 60 leased: 800-1,000 entries
      // either way. Planned on empty tables before migrations/0022, the pass read 5,481: the
      // pending tasks' index whole, for what came due and again for the tasks it leased by id.
      expect(pass.entriesRead, JSON.stringify(pass.byIndex)).toBeLessThan(2_000);
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
