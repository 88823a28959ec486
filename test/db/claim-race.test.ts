/** Racing claimers on one Postgres: no task is ever claimed twice, none is lost. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.ts';
import { taskClaimBatch } from '../../src/db/claim.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { lanesSweep } from '../../src/db/retention.ts';
import { taskCancel } from '../../src/db/tasks.ts';
import { dispatchRun } from '../../src/dispatcher/run.ts';
import { openPgDb } from '../../src/node/pg-db.ts';
import { loadKeyring } from '../../src/security/keyring.ts';
import { testConfig } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';
import { newTask } from '../helpers/tasks.ts';

let t: TestDatabase;
let endpoint: TestEndpoint;
let config: Config;

beforeAll(async () => {
  t = await createTestDatabase();
  endpoint = await startEndpoint();
  ({ config } = await testConfig(t.url));
});
afterAll(async () => {
  await endpoint.close();
  await t.drop();
});

async function enqueueMany(n: number, url: string): Promise<void> {
  for (let i = 0; i < n; i += 1_000) {
    const size = Math.min(1_000, n - i);
    await taskInsertMany(
      t.db,
      Array.from({ length: size }, (_, j) => newTask({ url, priority: (i + j) % 3, body: String(i + j) })),
    );
  }
}

describe('concurrent claims', () => {
  it('8 claimers, each on its own connection, never claim a task twice', async () => {
    await t.db.query('truncate sluice.tasks, sluice.finished, sluice.attempts cascade');
    await enqueueMany(3_000, 'https://example.com/hook');
    const claimers = Array.from({ length: 8 }, () => openPgDb(t.url, 1));
    const seen = new Map<string, number>();
    await Promise.all(
      claimers.map(async (db) => {
        for (;;) {
          const batch = await taskClaimBatch(db, { max: 16, clusterCap: null, queuesJson: '{}' });
          if (batch.length === 0) return;
          for (const task of batch) seen.set(task.id, (seen.get(task.id) ?? 0) + 1);
        }
      }),
    );
    await Promise.all(claimers.map((db) => db.close()));
    expect(seen.size).toBe(3_000);
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
    const [left] = await t.db.query<{ pending: number; leased: number }>(
      `select count(*) filter (where status = 'pending')::int as pending, count(*) filter (where status = 'leased')::int as leased from sluice.all_tasks`,
    );
    expect(left).toEqual({ pending: 0, leased: 3_000 });
  });

  it('4 dispatchers deliver every task exactly once over HTTP, and leave no lease behind', async () => {
    await t.db.query('truncate sluice.tasks, sluice.finished, sluice.attempts cascade');
    endpoint.received.length = 0;
    await enqueueMany(1_000, `${endpoint.url}/hook`);
    const keyring = await loadKeyring(config.signingKeys);
    const dbs = Array.from({ length: 4 }, () => openPgDb(t.url, 3));
    const reports = await Promise.all(
      dbs.map((db) => dispatchRun({ db, config: { ...config, dispatchParallelism: 8 }, keyring }, { budgetMs: 60_000 })),
    );
    await Promise.all(dbs.map((db) => db.close()));
    const ids = endpoint.received.map((p) => p.headers['sluice-task-id']);
    expect(ids).toHaveLength(1_000);
    expect(new Set(ids).size).toBe(1_000);
    expect(reports.reduce((sum, r) => sum + r.succeeded, 0)).toBe(1_000);
    // Every dispatcher took part: the claims really raced.
    expect(reports.every((r) => r.claimed > 0)).toBe(true);
    const [state] = await t.db.query<{ succeeded: number; other: number }>(
      `select count(*) filter (where status = 'succeeded')::int as succeeded, count(*) filter (where status <> 'succeeded')::int as other from sluice.all_tasks`,
    );
    expect(state).toEqual({ succeeded: 1_000, other: 0 });
  });
});

describe('lane hints under racing enqueues', () => {
  // A pass makes the hints of the lanes it looked at exact (sluice.lanes_recompute). An enqueue
  // that commits while it does must never be left in a lane without a hint: no claim looks there.
  it('a pass that makes hints exact never leaves a pending task without one', async () => {
    await t.db.query('truncate sluice.tasks, sluice.finished, sluice.attempts, sluice.lanes cascade');
    const LANES = 500;
    const key = (i: number) => `k${i % LANES}`;
    await taskInsertMany(
      t.db,
      Array.from({ length: LANES }, (_, i) => newTask({ concurrencyKey: key(i) })),
    );
    const passes = openPgDb(t.url, 1);
    const enqueuers = Array.from({ length: 2 }, () => openPgDb(t.url, 1));
    let enqueuing = true;
    let recomputes = 0;
    const recompute = async () => {
      while (enqueuing) {
        await passes.query(`select sluice.lanes_recompute(array(select id from sluice.lanes where head_priority is not null))`);
        recomputes++;
      }
    };
    // Each round empties a lane (its task claimed and finished: the hint stays, too good) and
    // enqueues into it again, while the hints of every lane with one are made exact over and over.
    const enqueue = async (db: (typeof enqueuers)[number], first: number) => {
      for (let round = 0; round < 800; round++) {
        const lane = key(first + round * 7);
        await db.query(`delete from sluice.tasks where concurrency_key = $1 and status = 'pending'`, [lane]);
        await taskInsertMany(db, [newTask({ concurrencyKey: lane })]);
      }
    };
    await Promise.all([recompute(), Promise.all(enqueuers.map((db, i) => enqueue(db, i * 250))).finally(() => (enqueuing = false))]);
    await Promise.all([passes, ...enqueuers].map((db) => db.close()));
    const [left] = await t.db.query<{ stranded: number; pending: number }>(
      `select count(*) filter (where k.head_priority is null)::int as stranded, count(*)::int as pending
       from sluice.tasks t join sluice.lanes k on k.queue = t.queue and k.lane = t.lane where t.status = 'pending'`,
    );
    expect(recomputes).toBeGreaterThan(50);
    expect(left).toEqual({ stranded: 0, pending: LANES });
    // Every lane's task is still claimable.
    expect(await taskClaimBatch(t.db, { max: 1_000, clusterCap: null, queuesJson: '{}' })).toHaveLength(LANES);
  });
});

describe('lanes swept under racing enqueues', () => {
  // The retention sweep deletes the lanes that hold no unfinished task (sluice.lanes_sweep; here
  // however recently touched). One that gains a task while it runs must stay (or come back): no
  // claim looks at a lane that is gone.
  it('a sweep never takes the lane of a task enqueued while it runs', async () => {
    await t.db.query('truncate sluice.tasks, sluice.finished, sluice.attempts, sluice.lanes cascade');
    const sweeper = openPgDb(t.url, 1);
    const enqueuers = Array.from({ length: 2 }, () => openPgDb(t.url, 1));
    let enqueuing = true;
    let swept = 0;
    const sweep = async () => {
      while (enqueuing) swept += await lanesSweep(sweeper, { perStatement: 200, idleMs: 0 });
    };
    // Each round leaves a key's lane empty (a task enqueued and cancelled), then enqueues the
    // task that stays, while the sweep deletes empty lanes over and over.
    const kept: string[] = [];
    const enqueue = async (db: (typeof enqueuers)[number], name: string) => {
      for (let round = 0; round < 400; round++) {
        const key = `${name}${round}`;
        const [first] = await taskInsertMany(db, [newTask({ queue: 'swept', concurrencyKey: key })]);
        await taskCancel(db, first!.task.id);
        const [stays] = await taskInsertMany(db, [newTask({ queue: 'swept', concurrencyKey: key })]);
        kept.push(stays!.task.id);
      }
    };
    await Promise.all([sweep(), Promise.all(enqueuers.map((db, i) => enqueue(db, `e${i}-`))).finally(() => (enqueuing = false))]);
    await Promise.all([sweeper, ...enqueuers].map((db) => db.close()));
    const [left] = await t.db.query<{ stranded: number; pending: number }>(
      `select count(*) filter (where k.head_priority is null)::int as stranded, count(*)::int as pending
       from sluice.tasks t left join sluice.lanes k on k.queue = t.queue and k.lane = t.lane where t.status = 'pending'`,
    );
    expect(swept).toBeGreaterThan(100);
    expect(left).toEqual({ stranded: 0, pending: kept.length });
    const claimed = await taskClaimBatch(t.db, { max: 1_000, clusterCap: null, queuesJson: '{}' });
    expect(claimed.map((c) => c.id).sort()).toEqual([...kept].sort());
  });
});
