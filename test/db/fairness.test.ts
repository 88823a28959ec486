/** Fairness across keys, and limits changed at run time, on real Postgres and real HTTP. */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.ts';
import { taskClaimBatch } from '../../src/db/claim.ts';
import type { Db } from '../../src/db/db.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { moveStragglers } from '../../src/db/history.ts';
import { keyLimitDelete, keyLimitPut, queueOverrideDelete, queueOverridePatch } from '../../src/db/queues.ts';
import { leaseSettleMany } from '../../src/db/settle.ts';
import { taskRedrive } from '../../src/db/tasks.ts';
import { dispatchRun } from '../../src/dispatcher/run.ts';
import type { Keyring } from '../../src/security/keyring.ts';
import type { TestDatabase } from '../helpers/db.ts';
import type { TestEndpoint } from '../helpers/endpoint.ts';
import { useDispatchFixture } from '../helpers/fixture.ts';
import { newTask } from '../helpers/tasks.ts';

const f = useDispatchFixture({
  SLUICE_QUEUES: JSON.stringify({ busy: { concurrency: 4, key_concurrency: 4 }, tuned: { concurrency: 3 } }),
  SLUICE_DISPATCH_PARALLELISM: '4',
});
let t: TestDatabase;
let endpoint: TestEndpoint;
let config: Config;
let keyring: Keyring;
beforeAll(() => {
  ({ t, endpoint, config, keyring } = f);
});

/** A Db that counts claim passes. */
function counting(db: Db): Db & { passes: number } {
  const counted = {
    passes: 0,
    query: (text: string, params?: readonly unknown[]) => {
      if (text.includes('sluice.claim(')) counted.passes++;
      return db.query(text, params);
    },
    transaction: db.transaction.bind(db),
  };
  return counted as Db & { passes: number };
}

const claim = (max: number) => taskClaimBatch(t.db, { max, clusterCap: null, queuesJson: JSON.stringify(config.queues) });

describe('round-robin across keys', () => {
  it('serves light keys within a few passes while a hot key, allowed the whole queue, has a deep backlog', async () => {
    const hot = Array.from({ length: 2_000 }, (_, i) =>
      newTask({ queue: 'busy', concurrencyKey: 'hot', url: `${endpoint.url}/hot`, body: String(i) }),
    );
    await taskInsertMany(t.db, hot);
    const db = counting(t.db);
    let lightsSent = false;
    let lightEnqueuedAt = -1;
    let passesAtLight = 0;
    let lastLightAt = -1;
    let passesAtLastLight = 0;
    endpoint.reply(async (push) => {
      const seen = endpoint.received.length;
      // After 40 hot pushes, 20 light keys arrive with one task each. Counted from their commit:
      // hot tasks pushed while the insert runs (many, on a loaded machine) are not the claim's choice.
      if (seen === 40 && !lightsSent) {
        lightsSent = true;
        await taskInsertMany(
          t.db,
          Array.from({ length: 20 }, (_, i) => newTask({ queue: 'busy', concurrencyKey: `light-${i}`, url: `${endpoint.url}/light` })),
        );
        lightEnqueuedAt = endpoint.received.length;
        passesAtLight = db.passes;
      }
      if (push.path === '/light') {
        lastLightAt = seen;
        passesAtLastLight = db.passes;
      }
      await new Promise((r) => setTimeout(r, 3));
      return { status: 200 };
    });
    const run = dispatchRun({ db, config, keyring }, { budgetMs: 60_000, maxPushes: 200 });
    const report = await run;
    const lights = endpoint.received.filter((p) => p.path === '/light');
    expect(lights).toHaveLength(20);
    const passes = passesAtLastLight - passesAtLight;
    const pushedBetween = lastLightAt - lightEnqueuedAt;
    // 20 light tasks through 4 slots: the hot key gets at most one more turn per slot (the 4
    // pushes already in flight, plus one round-robin turn) before the light keys are through.
    const hotMeanwhile = endpoint.received.slice(lightEnqueuedAt, lastLightAt).filter((p) => p.path === '/hot').length;
    console.info(
      `fairness: 20 light keys served within ${pushedBetween} pushes; ${passes} claim passes; hot pushes meanwhile ${hotMeanwhile}`,
    );
    expect(hotMeanwhile).toBeLessThanOrEqual(8);
    expect(passes).toBeLessThanOrEqual(40);
    expect(report.claimed).toBe(200);
  });

  it('takes the first task of every key before the second of any, and keeps FIFO within a key', async () => {
    const base = Date.now() - 10_000;
    await taskInsertMany(t.db, [
      ...[0, 1, 2].map((i) => newTask({ queue: 'wide', concurrencyKey: 'a', runAt: new Date(base + i), body: `"a${i}"` })),
      ...[0, 1].map((i) => newTask({ queue: 'wide', concurrencyKey: 'b', runAt: new Date(base + 100 + i), body: `"b${i}"` })),
      newTask({ queue: 'wide', concurrencyKey: 'c', runAt: new Date(base + 200), body: '"c0"' }),
    ]);
    const first = await claim(3);
    expect(first.map((x) => x.body).sort()).toEqual(['"a0"', '"b0"', '"c0"']);
    const second = await claim(10);
    expect(second.map((x) => x.body).sort()).toEqual(['"a1"', '"a2"', '"b1"']);
  });

  it('still honours priority before the round-robin', async () => {
    await taskInsertMany(t.db, [
      newTask({ queue: 'wide', concurrencyKey: 'a', priority: 1, body: '"a-low"' }),
      newTask({ queue: 'wide', concurrencyKey: 'b', priority: 0, body: '"b-high"' }),
      newTask({ queue: 'wide', concurrencyKey: 'b', priority: 0, body: '"b-high-2"' }),
    ]);
    expect((await claim(2)).map((x) => x.body).sort()).toEqual(['"b-high"', '"b-high-2"']);
  });

  it('lets a blocked key never block the others (skip, not wait)', async () => {
    await keyLimitPut(t.db, 'wide', 'a', 1);
    await taskInsertMany(t.db, [
      ...Array.from({ length: 5 }, () => newTask({ queue: 'wide', concurrencyKey: 'a', priority: -1 })),
      newTask({ queue: 'wide', concurrencyKey: 'b', priority: 5 }),
    ]);
    const got = await claim(10);
    expect(got.map((x) => x.concurrencyKey).sort()).toEqual(['a', 'b']);
    expect(await claim(10)).toEqual([]);
  });
});

describe('lane hints never hide work', () => {
  it('a delayed high-priority task does not rank its lane before it is due', async () => {
    await taskInsertMany(t.db, [
      newTask({ queue: 'wide', concurrencyKey: 'a', priority: -1, delayMs: 3_600_000, body: '"a-later"' }),
      newTask({ queue: 'wide', concurrencyKey: 'a', priority: 5, body: '"a-low"' }),
      newTask({ queue: 'wide', concurrencyKey: 'b', priority: 0, body: '"b"' }),
    ]);
    expect((await claim(1)).map((x) => x.body)).toEqual(['"b"']);
    expect((await claim(1)).map((x) => x.body)).toEqual(['"a-low"']);
  });

  it('a task that comes due is promoted and claimed in priority order', async () => {
    await taskInsertMany(t.db, [
      newTask({ queue: 'wide', concurrencyKey: 'a', priority: -1, delayMs: 300, body: '"a-soon"' }),
      ...Array.from({ length: 3 }, () => newTask({ queue: 'wide', concurrencyKey: 'b', priority: 0, body: '"b"' })),
    ]);
    expect((await claim(1)).map((x) => x.body)).toEqual(['"b"']);
    await new Promise((r) => setTimeout(r, 400));
    expect((await claim(1)).map((x) => x.body)).toEqual(['"a-soon"']);
  });

  it('a task enqueued while a claim waits for the lock is neither missed nor hidden', async () => {
    const got = await t.db.transaction(async (tx) => {
      await tx.query('select now()'); // the claim's transaction has begun…
      await new Promise((r) => setTimeout(r, 50));
      await taskInsertMany(t.db, [newTask({ queue: 'wide', concurrencyKey: 'late' })]); // …a task arrives…
      return tx.query(`select * from sluice.claim(10, null, '{}')`); // …and the claim runs
    });
    expect(got).toHaveLength(1);
  });

  it('a stream of new keys does not starve an old one', async () => {
    await taskInsertMany(
      t.db,
      Array.from({ length: 10 }, () => newTask({ queue: 'wide', concurrencyKey: 'old', body: '"old"' })),
    );
    const served: string[] = [];
    for (let pass = 0; pass < 12; pass++) {
      await taskInsertMany(t.db, [newTask({ queue: 'wide', concurrencyKey: `new-${pass}`, body: '"new"' })]);
      const got = await claim(1);
      served.push(JSON.parse(got[0]!.body!));
      // The claimed task finishes at once, so nothing is at a limit.
      await t.db.query(
        `update sluice.tasks set status = 'succeeded', lease_id = null, leased_at = null, lease_expires_at = null, finished_at = now() where status = 'leased'`,
      );
    }
    // Round-robin: each new key joins the back of the round, behind the old key once it is
    // waiting again, so the old key is served at passes 0, 2, 5, 9, … (as a FIFO of turns
    // would), never pushed back indefinitely by newcomers.
    expect(served.slice(0, 10)).toEqual(['old', 'new', 'old', 'new', 'new', 'old', 'new', 'new', 'new', 'old']);
  });

  it('lanes whose only tasks have expired (not yet reaped) do not block live ones', async () => {
    await taskInsertMany(t.db, [
      newTask({ queue: 'wide', concurrencyKey: 'x', priority: -1, ttlMs: 1 }),
      newTask({ queue: 'wide', concurrencyKey: 'y', priority: -1, ttlMs: 1 }),
      newTask({ queue: 'wide', concurrencyKey: 'live', priority: 0, body: '"live"' }),
    ]);
    await new Promise((r) => setTimeout(r, 20));
    expect((await claim(1)).map((x) => x.body)).toEqual(['"live"']);
  });

  it('a retry or redrive whose statement commits late is claimed, however late', async () => {
    const [retried, redriven] = await taskInsertMany(t.db, [
      newTask({ queue: 'wide', concurrencyKey: 'retried' }),
      newTask({ queue: 'wide', concurrencyKey: 'redriven' }),
    ]);
    const leased = await claim(10);
    expect(leased.map((x) => x.id).sort()).toEqual([retried!.task.id, redriven!.task.id].sort());
    const [retry] = leased.filter((x) => x.id === retried!.task.id);
    await t.db.query(
      `update sluice.tasks set status = 'dead', lease_id = null, leased_at = null, lease_expires_at = null, finished_at = now() where id = $1`,
      [redriven!.task.id],
    );
    await moveStragglers(t.db, 1);
    // Both writes are made in a transaction that stays open while claim passes run, the last
    // of them far past the promotion window's margin (moved clock): then both commit.
    const late = await t.db.transaction(async (tx) => {
      const settled = await leaseSettleMany(tx, [
        {
          taskId: retry!.id,
          leaseId: retry!.lease.id,
          leasedAt: retry!.lease.leasedAt,
          attempt: retry!.attempts,
          durationMs: 1,
          settlement: {
            status: 'pending',
            reason: 'retry',
            runAt: new Date(0),
            attemptsDelta: 0,
            deferralsDelta: 0,
            error: 'x',
            httpStatus: 500,
          },
        },
      ]);
      await taskRedrive(tx, redriven!.task.id);
      const during = await taskClaimBatch(t.db, {
        max: 10,
        clusterCap: null,
        queuesJson: '{}',
        now: new Date(Date.now() + 60_000),
      });
      return { settled, during };
    });
    expect(late.settled.get(retry!.id)).toBe('pending');
    expect(late.during).toEqual([]);
    const after = await taskClaimBatch(t.db, { max: 10, clusterCap: null, queuesJson: '{}', now: new Date(Date.now() + 3_600_000) });
    expect(after.map((x) => x.id).sort()).toEqual([retried!.task.id, redriven!.task.id].sort());
  });

  it('a task that comes due in a lane an enqueue holds is promoted once the enqueue ends', async () => {
    const [later] = await taskInsertMany(t.db, [newTask({ queue: 'wide', concurrencyKey: 'held', delayMs: 1_000 })]);
    const due = later!.task.runAt.getTime();
    // A pass just before it comes due (passes run all the time; this one sets the window).
    expect(await taskClaimBatch(t.db, { max: 10, clusterCap: null, queuesJson: '{}', now: new Date(due - 1) })).toEqual([]);
    const passed = await t.db.transaction(async (tx) => {
      // An enqueue into the same lane holds its row while the first pass after the task came due runs.
      await tx.query(`insert into sluice.tasks (queue, url, concurrency_key, max_attempts, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, timeout_ms, lease_ms, run_at)
                      values ('wide', 'https://example.com', 'held', 1, 1000, 1000, 2, 0, 1000, 2000, now() + interval '1 hour')`);
      return taskClaimBatch(t.db, { max: 10, clusterCap: null, queuesJson: '{}', now: new Date(due + 15_000) });
    });
    expect(passed).toEqual([]);
    const after = await taskClaimBatch(t.db, { max: 10, clusterCap: null, queuesJson: '{}', now: new Date(due + 16_000) });
    expect(after.map((x) => x.id)).toEqual([later!.task.id]);
  });

  it('an enqueue transaction left open on a lane does not stall claims', async () => {
    await taskInsertMany(t.db, [newTask({ queue: 'wide', concurrencyKey: 'a' }), newTask({ queue: 'wide', concurrencyKey: 'b' })]);
    const open = await t.db.transaction(async (tx) => {
      await tx.query(`insert into sluice.tasks (queue, url, concurrency_key, max_attempts, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, timeout_ms, lease_ms)
                      values ('wide', 'https://example.com', 'a', 1, 1000, 1000, 2, 0, 1000, 2000)`);
      const started = Date.now();
      const got = await claim(10);
      return { ms: Date.now() - started, n: got.length };
    });
    expect(open.n).toBe(2);
    expect(open.ms).toBeLessThan(1_000);
  });
});

describe('run-time overrides', () => {
  it('take effect on the next pass; a limit lowered below what is leased claims nothing until it drains', async () => {
    await taskInsertMany(
      t.db,
      Array.from({ length: 20 }, () => newTask({ queue: 'tuned' })),
    );
    expect(await claim(10)).toHaveLength(3); // env: concurrency 3
    await queueOverridePatch(t.db, 'tuned', { concurrency: 5 });
    expect(await claim(10)).toHaveLength(2); // raised to 5: two more
    await queueOverridePatch(t.db, 'tuned', { concurrency: 2 });
    expect(await claim(10)).toHaveLength(0); // lowered below the 5 leased: nothing
    // Drain three leases: 2 left, still at the limit of 2.
    await t.db.query(
      `update sluice.tasks set status = 'succeeded', lease_id = null, leased_at = null, lease_expires_at = null, finished_at = now()
       where id in (select id from sluice.all_tasks where status = 'leased' limit 3)`,
    );
    expect(await claim(10)).toHaveLength(0);
    await t.db.query(
      `update sluice.tasks set status = 'succeeded', lease_id = null, leased_at = null, lease_expires_at = null, finished_at = now()
       where id in (select id from sluice.all_tasks where status = 'leased' limit 1)`,
    );
    expect(await claim(10)).toHaveLength(1);
    // Removing the override restores the environment's 3.
    await queueOverrideDelete(t.db, 'tuned');
    expect(await claim(10)).toHaveLength(1);
  });

  it('pause and resume a queue, and set and drop a key limit', async () => {
    await taskInsertMany(
      t.db,
      Array.from({ length: 6 }, () => newTask({ queue: 'wide', concurrencyKey: 'k' })),
    );
    await queueOverridePatch(t.db, 'wide', { paused: true });
    expect(await claim(10)).toEqual([]);
    await queueOverridePatch(t.db, 'wide', { paused: false });
    await keyLimitPut(t.db, 'wide', 'k', 2);
    expect(await claim(10)).toHaveLength(2);
    await keyLimitDelete(t.db, 'wide', 'k');
    expect(await claim(10)).toHaveLength(4);
  });

  it('the first task to give a key a limit sets it; later tasks do not change it', async () => {
    await taskInsertMany(t.db, [
      newTask({ queue: 'wide', concurrencyKey: 'tenant', concurrencyLimit: 2 }),
      newTask({ queue: 'wide', concurrencyKey: 'tenant', concurrencyLimit: 5 }),
      ...Array.from({ length: 4 }, () => newTask({ queue: 'wide', concurrencyKey: 'tenant' })),
    ]);
    expect(await claim(10)).toHaveLength(2);
    await taskInsertMany(t.db, [newTask({ queue: 'wide', concurrencyKey: 'tenant', concurrencyLimit: 9 })]);
    expect(await claim(10)).toHaveLength(0);
  });

  it('a cluster cap holds across queues', async () => {
    await taskInsertMany(t.db, [
      ...Array.from({ length: 5 }, () => newTask({ queue: 'x' })),
      ...Array.from({ length: 5 }, () => newTask({ queue: 'y' })),
    ]);
    const capped = (max: number) => taskClaimBatch(t.db, { max, clusterCap: 4, queuesJson: '{}' });
    expect(await capped(10)).toHaveLength(4);
    expect(await capped(10)).toHaveLength(0);
  });
});
