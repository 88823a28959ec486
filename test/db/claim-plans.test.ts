/**
 * Plans against the statistics they were made from. A session plans the claim once (generic
 * plans, migrations/functions/claim.sql), the settle once per connection (a prepared statement),
 * and keeps the plans until the tables' statistics change. Planned while the task table was empty
 * (after an autovacuum that found every task finished), they read the whole table, or a whole
 * index, for what they look up: in keyed runs at 300-500 tasks/s each claim pass then grew from a
 * few ms to 30–48 ms as the table filled again, until the next autovacuum made new plans
 * (docs/operations.md, "Storage"; migrations/0021 and 0022). No claim, settle or lease call may
 * read the task or lane tables, or their indexes, whole, whatever they held when it was planned:
 * each test counts what one of them read.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ClaimLimits, taskClaimBatch } from '../../src/db/claim.ts';
import type { Db, Queryable } from '../../src/db/db.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { leaseHeartbeat, leaseNote } from '../../src/db/leases.ts';
import type { NewTask } from '../../src/db/new-task.ts';
import { leaseEnding, leaseSettleMany } from '../../src/db/settle.ts';
import { taskList } from '../../src/db/tasks.ts';
import { openPgDb } from '../../src/node/pg-db.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { newTask } from '../helpers/tasks.ts';

/** Counts by relation name: sequential scans of the task and lane tables, index entries read from their indexes. */
interface Reads {
  seqScans: Record<string, number>;
  entries: Record<string, number>;
}

/**
 * What this connection has read of the task and lane tables and their indexes and not yet
 * reported. Counts from earlier transactions wait with it until the connection reports them (at
 * most once a second, never inside a transaction), so what one transaction did is the
 * difference between a reading at its start and one at its end.
 */
async function readsSoFar(query: (sql: string) => Promise<Array<{ name: string; seq: boolean; n: number }>>): Promise<Reads> {
  const rows = await query(
    `select c.relname::text as name, c.relkind = 'r' as seq,
            -- A table's scans are its sequential ones (pg_stat_xact_user_tables.seq_scan).
            (case when c.relkind = 'r' then pg_stat_get_xact_numscans(c.oid) else pg_stat_get_xact_tuples_returned(c.oid) end)::int as n
     from pg_class c
     where c.oid in ('sluice.tasks'::regclass, 'sluice.lanes'::regclass)
        or c.oid in (select indexrelid from pg_index where indrelid in ('sluice.tasks'::regclass, 'sluice.lanes'::regclass))`,
  );
  return {
    seqScans: Object.fromEntries(rows.filter((r) => r.seq).map((r) => [r.name, r.n])),
    entries: Object.fromEntries(rows.filter((r) => !r.seq).map((r) => [r.name, r.n])),
  };
}

/** What happened between two readings: the counts that grew, by name. */
function readsBetween(before: Reads, after: Reads): Reads {
  const grew = (a: Record<string, number>, b: Record<string, number>) =>
    Object.fromEntries(
      Object.entries(b)
        .map(([name, n]) => [name, n - (a[name] ?? 0)])
        .filter(([, n]) => (n as number) > 0),
    );
  return { seqScans: grew(before.seqScans, after.seqScans), entries: grew(before.entries, after.entries) };
}

const sum = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);

/** Enqueues `n` tasks, the i-th with `fields(i)`. */
function insertTasks(db: Db, n: number, fields: (i: number) => Partial<NewTask>) {
  return taskInsertMany(
    db,
    Array.from({ length: n }, (_, i) => newTask(fields(i))),
  );
}

/** One claim pass of the dispatcher's (pushed queues), with no cluster cap unless `limits` sets one. */
function claimPass(db: Queryable, max: number, limits: Partial<ClaimLimits> = {}) {
  return taskClaimBatch(db, { max, clusterCap: null, queuesJson: '{}', ...limits });
}

/** What `work` read, run in one transaction of `db`, with what it returned. */
async function readsDuring<T>(db: Db, work: (tx: Queryable) => Promise<T>): Promise<{ result: T } & Reads> {
  return db.transaction(async (tx) => {
    const query = (sql: string) => tx.query<{ name: string; seq: boolean; n: number }>(sql);
    const before = await readsSoFar(query);
    const result = await work(tx);
    return { result, ...readsBetween(before, await readsSoFar(query)) };
  });
}

/**
 * A database for these tests, its task and lane tables kept from autovacuum: an autoanalyze
 * after the tables fill up would make the plans again from full statistics, and the test would
 * then measure plans it did not set out to.
 */
async function databaseWithoutAutovacuum(): Promise<TestDatabase> {
  const t = await createTestDatabase();
  await t.db.query('alter table sluice.tasks set (autovacuum_enabled = false)');
  await t.db.query('alter table sluice.lanes set (autovacuum_enabled = false)');
  return t;
}

/**
 * A database of the enclosing describe block's own (what the tables held before decides the
 * plans), made before its tests and dropped after them.
 */
function databaseOfThisBlock(): () => TestDatabase {
  let t: TestDatabase | undefined;
  beforeAll(async () => {
    t = await databaseWithoutAutovacuum();
  });
  afterAll(() => t?.drop());
  return () => t!;
}

/** What the planner believes the task table holds. */
async function rowsPlannedFor(t: TestDatabase): Promise<number> {
  const [row] = await t.db.query<{ n: number }>(`select reltuples::int as n from pg_class where oid = 'sluice.tasks'::regclass`);
  return row!.n;
}

/**
 * The task table as an autovacuum leaves it when every task had finished: `n` rows came and
 * went, their pages stay (migrations/0021), and its statistics say "no rows".
 */
async function emptiedByVacuum(t: TestDatabase, queue: string, n: number): Promise<void> {
  await insertTasks(t.db, n, () => ({ queue }));
  await t.db.query('delete from sluice.tasks');
  await t.db.query('vacuum (analyze) sluice.tasks');
}

/** What one claim pass in `session` leased and read. */
async function onePass(session: pg.Client, max: number, now: Date): Promise<{ claimed: number } & Reads> {
  const query = async (sql: string) => (await session.query(sql)).rows;
  await session.query('begin');
  try {
    const before = await readsSoFar(query);
    const { rows } = await session.query<{ n: number }>(`select count(*)::int as n from sluice.claim($1, null, '{}'::jsonb, $2)`, [
      max,
      now,
    ]);
    return { claimed: rows[0]!.n, ...readsBetween(before, await readsSoFar(query)) };
  } finally {
    await session.query('rollback');
  }
}

describe('the claim, whatever its tables held when it was planned', () => {
  // Planned on empty, vacuumed tables ("no pages, no rows", as after an autovacuum that found
  // every task finished), or on the same tables full: either way a pass reads what it serves,
  // never the backlog.
  const database = databaseOfThisBlock();
  it.each(['empty', 'full'] as const)('planned on %s tables, reads its lanes and tasks through their indexes', async (when) => {
    const t = database();
    const queue = `plans-${when}`;
    // 40 keys of at most 2 with 100 tasks each, and 10 keys whose tasks were delayed and came due
    // since (their lanes have no hint yet: the pass finds them through the delayed tasks' index).
    // Autovacuum is off for these tables (databaseWithoutAutovacuum), so the statistics stay
    // what the plans were made from.
    const fill = async () => {
      await insertTasks(t.db, 4_000, (i) => ({ queue, concurrencyKey: `k${i % 40}`, concurrencyLimit: 2 }));
      await insertTasks(t.db, 200, (i) => ({ queue, concurrencyKey: `d${i % 10}`, concurrencyLimit: 2, delayMs: 30_000 }));
      // 10 tasks that waited on children, all finished now: the pass resumes them first.
      const waited = await insertTasks(t.db, 10, (i) => ({ queue, concurrencyKey: `w${i}`, concurrencyLimit: 2 }));
      await t.db.query(`update sluice.tasks set status = 'waiting' where id = any($1::bigint[])`, [waited.map((w) => w.task.id)]);
      // And 2,000 lanes with nothing due for an hour: a pass that walked the lanes' index whole
      // would read them all.
      await insertTasks(t.db, 2_000, (i) => ({ queue, concurrencyKey: `later${i}`, delayMs: 3_600_000 }));
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
      await claimPass(t.db, 40, { now });

      // The plans stay what they were made from.
      expect(await rowsPlannedFor(t)).toBe(when === 'empty' ? 0 : 6_210);
      // The delayed tasks are due 45 s later; the leases still held.
      const pass = await onePass(session, 60, new Date(now.getTime() + 45_000));
      expect(pass.claimed).toBe(60);
      expect(pass.seqScans).toEqual({});
      // 40 leases held, 60 lanes looked at, 200 tasks come due, 10 resumed, 60 leased: 871
      // entries planned on empty tables, 981 on full ones. With the claim's lanes found by joins
      // (before 33baaf4), a pass planned on empty tables read 30,007: the lanes' indexes whole
      // (2,060 lanes), again and again; before migrations/0022, also the pending tasks' index
      // for what came due and what it leased by id.
      expect(sum(pass.entries), JSON.stringify(pass.entries)).toBeLessThan(2_000);
    } finally {
      await session.end();
    }
  });
});

describe('the settle after a vacuum found the task table empty', () => {
  const database = databaseOfThisBlock();

  it('finds its leases by their ids, not by reading the table or an index whole', async () => {
    const t = database();
    await emptiedByVacuum(t, 'plans-settle', 2_000);
    // One connection: its prepared settle turns generic after five runs, planned now.
    const one = openPgDb(t.url, 1);
    try {
      const gone = { id: '1', attempts: 1, lease: { id: crypto.randomUUID(), leasedAt: new Date(), expiresAt: new Date() } };
      for (let i = 0; i < 8; i++) {
        await leaseSettleMany(one, [leaseEnding(gone, { status: 'succeeded', result: null, httpStatus: 200 }, 1)]);
      }
      await insertTasks(t.db, 2_000, () => ({ queue: 'plans-settle' }));
      const leased = await claimPass(t.db, 20);
      expect(leased).toHaveLength(20);
      expect(await rowsPlannedFor(t)).toBe(0);
      // Half succeed, half fail and retry at once (their lanes' hints are lowered too).
      const retry = {
        status: 'pending',
        reason: 'retry',
        runAt: new Date(),
        attemptsDelta: 0,
        deferralsDelta: 0,
        error: 'HTTP 500',
        httpStatus: 500,
      } as const;
      const { result: held, ...reads } = await readsDuring(one, (tx) =>
        leaseSettleMany(
          tx,
          leased.map((task, i) => leaseEnding(task, i % 2 === 0 ? { status: 'succeeded', result: null, httpStatus: 200 } : retry, 1)),
        ),
      );
      expect([...held.values()].sort()).toEqual([...Array(10).fill('pending'), ...Array(10).fill('succeeded')]);
      expect(reads.seqScans).toEqual({});
      // Each lease found by its id: 20 tasks, 70 entries. Before the settle's lookups by id
      // (db/settle.ts), it read the task table's primary key whole, three times: 6,050 entries.
      expect(sum(reads.entries), JSON.stringify(reads.entries)).toBeLessThan(200);
    } finally {
      await one.close();
    }
  });
});

describe('the lease calls after a vacuum found the task table empty', () => {
  const database = databaseOfThisBlock();

  it('find a lease by its task id, not through the index of every lease', async () => {
    const t = database();
    await emptiedByVacuum(t, 'plans-lease', 1_000);
    await insertTasks(t.db, 1_000, () => ({ queue: 'plans-lease' }));
    const leased = await claimPass(t.db, 1_000);
    expect(await rowsPlannedFor(t)).toBe(0);
    const task = leased[500]!;
    const { result: beat, ...reads } = await readsDuring(t.db, async (tx) => {
      const beat = await leaseHeartbeat(tx, task.id, task.lease.id, 60_000, 3_600_000);
      await leaseNote(tx, task.id, task.lease.id, 'no answer yet');
      return beat;
    });
    expect(beat.ok).toBe(true);
    expect(reads.seqScans).toEqual({});
    // Two probes of the primary key. Written with `status = 'leased'`, the heartbeat read all
    // 1,000 leases' entries (tasks_lane_leased, by their expiry) to find one.
    expect(sum(reads.entries), JSON.stringify(reads.entries)).toBeLessThan(20);
  });
});

describe("listing a small queue's pending tasks beside another queue's backlog", () => {
  const database = databaseOfThisBlock();

  it("reads that queue's entries, not the task table", async () => {
    const t = database();
    await insertTasks(t.db, 20, () => ({ queue: 'small' }));
    await insertTasks(t.db, 3_000, () => ({ queue: 'big' }));
    await t.db.query('vacuum (analyze) sluice.tasks');
    const { result: listed, ...reads } = await readsDuring(t.db, (tx) => taskList(tx, { queue: 'small', status: 'pending', limit: 10 }));
    expect(listed).toHaveLength(10);
    expect(reads.seqScans).toEqual({});
    // The queue's own index by status (migrations/0022): ten entries. Without one, the newest
    // first order walked the primary key back through the other queue's 3,000 tasks.
    expect(sum(reads.entries), JSON.stringify(reads.entries)).toBeLessThan(50);
  });
});

describe('a claim pass beside leases held for long', () => {
  const database = databaseOfThisBlock();

  it('counts only the leases a limit reads: none without one, all under a cluster cap', async () => {
    const t = database();
    // 3,000 leases an endpoint keeps (heartbeats), in a queue with no limit.
    await insertTasks(t.db, 3_000, () => ({ queue: 'kept' }));
    for (let i = 0; i < 3; i++) expect(await claimPass(t.db, 1_000)).toHaveLength(1_000);
    await insertTasks(t.db, 40, () => ({ queue: 'fresh' }));
    await t.db.query('vacuum (analyze) sluice.tasks');
    const pass = (clusterCap: number | null, queuesJson: string) =>
      readsDuring(t.db, async (tx) => (await claimPass(tx, 10, { clusterCap, queuesJson })).length);

    // Neither queue limited, no cluster cap: no lease is counted. Before the counts were made
    // where a limit reads them (migrations/functions/claim.sql), the pass read all 3,000.
    const free = await pass(null, '{}');
    expect(free.result).toBe(10);
    expect(sum(free.entries), JSON.stringify(free.entries)).toBeLessThan(200);
    // A limit on the queue it claims from: that queue's leases only.
    const limited = await pass(null, '{"fresh":{"concurrency":25}}');
    expect(limited.result).toBe(10);
    expect(sum(limited.entries), JSON.stringify(limited.entries)).toBeLessThan(200);
    // A cluster cap counts every lease: 3,020 held, 5 places left under 3,025.
    const capped = await pass(3_025, '{}');
    expect(capped.result).toBe(5);
    expect(sum(capped.entries)).toBeGreaterThan(3_000);
  });
});

describe('whether work waits for a claim pass, after a vacuum found the tables empty', () => {
  const database = databaseOfThisBlock();

  it('reads an index entry or two, not every lane', async () => {
    const t = database();
    await t.db.query('vacuum (analyze) sluice.lanes');
    await emptiedByVacuum(t, 'plans-waits', 100);
    // 2,000 lanes with nothing due for an hour: none has a hint.
    await insertTasks(t.db, 2_000, (i) => ({ queue: 'plans-waits', concurrencyKey: `later${i}`, delayMs: 3_600_000 }));
    const waits = () => readsDuring(t.db, async (tx) => (await tx.query<{ w: boolean }>('select sluice.work_waits() as w'))[0]!.w);
    // The deleted tasks left their lane's hint too good: work may wait, says it, until a pass
    // finds nothing there and makes the hint exact.
    expect((await waits()).result).toBe(true);
    expect(await claimPass(t.db, 10)).toEqual([]);
    const none = await waits();
    expect(none.result).toBe(false);
    expect(none.seqScans).toEqual({});
    // Each of its two lookups stops at its partial index's first entry, of which there is none.
    expect(sum(none.entries), JSON.stringify(none.entries)).toBeLessThan(5);
    await insertTasks(t.db, 1, () => ({ queue: 'plans-waits' }));
    expect((await waits()).result).toBe(true);
  });
});
