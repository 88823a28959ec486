/**
 * Backpressure on a real Postgres (migrations/0016_levels.sql): a Retry-After holds its level,
 * an adaptive queue's limit learns from overload answers and successes (AIMD), with claim
 * passes at a clock the test moves; then the dispatcher against a real endpoint that takes at
 * most C pushes at once and answers 429 above that.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { concurrencyPicture } from '../../src/api/queue-ops.ts';
import type { Config } from '../../src/config.ts';
import type { Settlement, Signal } from '../../src/core/outcome.ts';
import type { LeasedTask } from '../../src/core/types.ts';
import { taskClaimBatch } from '../../src/db/claim.ts';
import { nextDueInMs } from '../../src/db/due.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { levelsLearnUnanswered } from '../../src/db/levels.ts';
import { levelsSweep } from '../../src/db/retention.ts';
import { leaseSettleMany } from '../../src/db/settle.ts';
import { dispatchRun } from '../../src/dispatcher/run.ts';
import { openPgDb } from '../../src/node/pg-db.ts';
import { loadKeyring } from '../../src/security/keyring.ts';
import { testConfig } from '../helpers/config.ts';
import { createTestDatabase, emptyTables, type TestDatabase } from '../helpers/db.ts';
import { startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';
import { claimAtMs, dbNowMs, longDue } from '../helpers/moved-clock.ts';
import { newTask } from '../helpers/tasks.ts';

const QUEUES = {
  keyed: {},
  adaptive: { concurrency: 8, adaptive: true },
  fixed: { concurrency: 8 },
  cap: { concurrency: 64, adaptive: true },
  capkeyed: { key_concurrency: 16, adaptive: true },
};

let t: TestDatabase;
let config: Config;
let endpoint: TestEndpoint;

beforeAll(async () => {
  [t, endpoint] = await Promise.all([createTestDatabase(), startEndpoint()]);
  // 64 places: what a level holds at once is up to its limits, not the run's places.
  ({ config } = await testConfig(t.url, {
    SLUICE_QUEUES: JSON.stringify(QUEUES),
    SLUICE_ALLOW_PRIVATE_TARGETS: 'true',
    SLUICE_DISPATCH_PARALLELISM: '64',
  }));
});
afterAll(async () => {
  await endpoint?.close();
  await t?.drop();
});
beforeEach(async () => {
  await emptyTables(t.db, 'sluice.tasks, sluice.lanes, sluice.queues, sluice.key_limits');
  await t.db.query('update sluice.promotion set promoted_to = now()');
});

const dbNow = () => dbNowMs(t.db);

const claimAt = (ms: number, max = 100) => claimAtMs(t.db, config, ms, max);

const due = longDue;

/**
 * Ends leases as the dispatcher would after each push's answer. A push's signal names its URL
 * (`withUrl`), so that a Retry-After holds its origin (0027_endpoints.sql); without it, the
 * level alone is taught.
 */
function settle(tasks: readonly LeasedTask[], settlement: Settlement, signal: Signal | null, withUrl = false) {
  return leaseSettleMany(
    t.db,
    tasks.map((task) => ({
      taskId: task.id,
      leaseId: task.lease.id,
      leasedAt: task.lease.leasedAt,
      attempt: task.attempts,
      settlement,
      durationMs: 10,
      signal: signal && {
        signal,
        queue: task.queue,
        concurrencyKey: task.concurrencyKey,
        deferrals: task.deferrals,
        ...(withUrl ? { url: task.url, health: signal === 'hold' ? ('hold' as const) : null } : {}),
      },
    })),
    ['adaptive', 'cap', 'capkeyed'],
  );
}

const retry = (status: number): Settlement => ({
  status: 'pending',
  reason: 'retry',
  runAt: new Date(Date.now() + 1_000),
  attemptsDelta: 0,
  deferralsDelta: 0,
  error: `HTTP ${status}`,
  httpStatus: status,
});
/** A 429 or 503 with `Retry-After: 1`, as core/outcome.ts decides it. */
const retryAfter = (status: number): Settlement => ({
  status: 'pending',
  reason: 'deferred',
  runAt: new Date(Date.now() + 1_000),
  attemptsDelta: -1,
  deferralsDelta: 1,
  error: `deferred by HTTP ${status} with Retry-After`,
  httpStatus: status,
});
const ok: Settlement = { status: 'succeeded', result: null, httpStatus: 200 };

const level = async (queue: string, lane: string) =>
  (
    await t.db.query<{ effective: number | null; held: boolean; reason: string | null }>(
      `select effective, held_until > now() as held, reason from sluice.levels where queue = $1 and lane = $2`,
      [queue, lane],
    )
  )[0];

describe('Retry-After holds the level', () => {
  it('holds the key of the task that got it: no other task of that key is leased until then, other keys are', async () => {
    await taskInsertMany(t.db, [
      newTask({ queue: 'keyed', concurrencyKey: 'a', runAt: due() }),
      newTask({ queue: 'keyed', concurrencyKey: 'b', runAt: due() }),
    ]);
    const start = await dbNow();
    const first = await claimAt(start);
    expect(first.map((x) => x.concurrencyKey).sort()).toEqual(['a', 'b']);
    await taskInsertMany(t.db, [
      newTask({ queue: 'keyed', concurrencyKey: 'a', runAt: due() }),
      newTask({ queue: 'keyed', concurrencyKey: 'b', runAt: due() }),
    ]);
    await settle(
      first.filter((x) => x.concurrencyKey === 'a'),
      retryAfter(429),
      'hold',
    );
    expect(await level('keyed', 'k:a')).toMatchObject({ held: true, reason: 'held: Retry-After from HTTP 429' });
    const picture = await concurrencyPicture(config, t.db, 'keyed');
    const a = picture.keys.find((k) => k.key === 'a');
    expect(a?.learnt).toMatchObject({ reason: 'held: Retry-After from HTTP 429' });
    expect(a!.learnt!.heldUntil!.getTime()).toBeGreaterThan(picture.now.getTime());
    // The dispatcher is woken when the hold ends (key a's tasks are due and wait for it).
    expect(await nextDueInMs(t.db)).toBeLessThanOrEqual(1_000);

    const during = await claimAt(start + 500);
    expect(during.map((x) => x.concurrencyKey)).toEqual(['b']);
    expect(await claimAt(start + 900)).toEqual([]);
    const after = await claimAt(start + 1_500);
    expect(after.map((x) => x.concurrencyKey)).toEqual(['a', 'a']);
  });

  // Only a signal that names no URL still holds a keyless task's queue; a push's names one, and
  // holds its origin instead (the next test, and test/db/endpoints.test.ts).
  it('holds the whole queue for a keyless signal that names no URL', async () => {
    await taskInsertMany(t.db, [newTask({ queue: 'fixed', runAt: due() })]);
    const start = await dbNow();
    const [task] = await claimAt(start);
    await taskInsertMany(t.db, [newTask({ queue: 'fixed', runAt: due() }), newTask({ queue: 'fixed', concurrencyKey: 'k', runAt: due() })]);
    await settle([task!], retryAfter(503), 'hold');
    expect(await level('fixed', '*')).toMatchObject({ held: true, reason: 'held: Retry-After from HTTP 503' });
    expect(await claimAt(start + 500)).toEqual([]);
    const [held] = await t.db.query<{ value: string }>(
      `select value::text from sluice.counters where metric = 'held_back' and queue = 'fixed' and label = 'held'`,
    );
    expect(held?.value).toBe('1');
    expect(await claimAt(start + 2_000)).toHaveLength(3);
  });

  it("holds a keyless push's origin, not its queue: the queue's tasks to other origins are leased, keyed or not", async () => {
    const [a, b] = ['https://a.example', 'https://b.example'];
    await taskInsertMany(t.db, [newTask({ queue: 'fixed', url: `${a}/1`, runAt: due() })]);
    const start = await dbNow();
    const [task] = await claimAt(start);
    await taskInsertMany(t.db, [
      newTask({ queue: 'fixed', url: `${a}/2`, runAt: due() }),
      newTask({ queue: 'fixed', url: `${a}/3`, concurrencyKey: 'k', runAt: due() }),
      newTask({ queue: 'fixed', url: `${b}/4`, runAt: due() }),
      newTask({ queue: 'fixed', url: `${b}/5`, concurrencyKey: 'k', runAt: due() }),
    ]);
    await settle([task!], retryAfter(503), 'hold', true);
    expect(await level('fixed', '*')).toBeUndefined();
    expect((await claimAt(start + 500)).map((x) => x.url).sort()).toEqual([`${b}/4`, `${b}/5`]);
    expect((await claimAt(start + 2_000)).map((x) => x.url).sort()).toEqual([`${a}/1`, `${a}/2`, `${a}/3`]);
  });
});

describe('an adaptive queue learns its limit (AIMD)', () => {
  it('lowers to 85% on an overload once per window, gives the attempt back, and adds one after a window of successes', async () => {
    await taskInsertMany(
      t.db,
      Array.from({ length: 30 }, () => newTask({ queue: 'adaptive', runAt: due() })),
    );
    const start = await dbNow();
    const first = await claimAt(start);
    expect(first).toHaveLength(8);

    // Two 429s in one settle: one cut (8 in flight → 6), and neither uses an attempt.
    await settle(first.slice(0, 2), retry(429), 'overload');
    expect(await level('adaptive', '*')).toMatchObject({ effective: 6, reason: 'lowered: HTTP 429' });
    const picture = await concurrencyPicture(config, t.db, 'adaptive');
    expect(picture.queueLevel).toMatchObject({ limit: 8, effective: 6, learnt: { reason: 'lowered: HTTP 429' } });
    const [given] = await t.db.query<{ attempts: number; deferrals: number; status: string }>(
      'select attempts, deferrals, status from sluice.tasks where id = $1',
      [first[0]!.id],
    );
    expect(given).toEqual({ attempts: 0, deferrals: 1, status: 'pending' });
    const [history] = await t.db.query<{ outcome: string }>('select outcome from sluice.attempts where task_id = $1', [first[0]!.id]);
    expect(history?.outcome).toBe('deferred');

    // Another from a lease that began before the cut was in flight under the old limit.
    await settle(first.slice(2, 3), retry(429), 'overload');
    expect(await level('adaptive', '*')).toMatchObject({ effective: 6 });

    // 5 in flight, the limit 6: one more.
    expect(await claimAt(start + 10_000)).toHaveLength(1);
    // 5 successes are not yet a window (at least 8): the limit stays.
    await settle(first.slice(3, 8), ok, 'ok');
    expect(await level('adaptive', '*')).toMatchObject({ effective: 6 });
    const second = await claimAt(start + 20_000);
    expect(second).toHaveLength(5);
    // 8 successes while the limit is in use add one.
    await settle(second.slice(0, 3), ok, 'ok');
    expect(await level('adaptive', '*')).toMatchObject({ effective: 7, reason: 'raised: a window of successes' });
    const third = await claimAt(start + 30_000);
    expect(third).toHaveLength(4);

    // An overload from a lease that began after the cut lowers it again: 7 in flight → 5.
    await settle(third.slice(0, 1), retry(503), 'overload');
    expect(await level('adaptive', '*')).toMatchObject({ effective: 5, reason: 'lowered: HTTP 503' });
  });

  it('cuts a level to 85% of what it had in flight, rounded down', async () => {
    await taskInsertMany(
      t.db,
      Array.from({ length: 20 }, () => newTask({ queue: 'cap', runAt: due() })),
    );
    const leased = await claimAt(await dbNow());
    expect(leased).toHaveLength(20);
    // 20 in flight → 17 (a cut by a quarter would leave 15).
    await settle(leased.slice(0, 1), retry(429), 'overload');
    expect(await level('cap', '*')).toMatchObject({ effective: 17 });
  });

  it('a level 2 + 30% of its limit windows past its last cut adds a quarter a window: 8 → 24 in 99 successes, not 248', async () => {
    // A level cut to 8 whose endpoint now takes 24: each window of successes (as many as its
    // limit, all in flight at once) takes 100 ms, and no overload comes. The rule is
    // sluice.levels_learn's, called as the settle calls it, on a clock the test moves: in each
    // window's transaction the level's instants are set from the database's now (which that
    // transaction keeps), as long ago as the moved clock says they are.
    await t.db.query(`insert into sluice.levels (queue, lane, effective, reason) values ('cap', '*', 8, 'lowered: HTTP 429')`);
    let clock = 0;
    let cutAt = 0;
    let movedAt = 0;
    const windowOf = (limit: number) =>
      t.db.transaction(async (tx) => {
        await tx.query(
          `update sluice.levels set decreased_at = now() - make_interval(secs => $1 / 1000.0), moved_at = now() - make_interval(secs => $2 / 1000.0)
           where queue = 'cap' and lane = '*'`,
          [clock - cutAt, clock - movedAt],
        );
        const signals = Array.from({ length: limit }, () => ({ queue: 'cap', level: '*', signal: 'ok', adaptive: true }));
        await tx.query('select sluice.levels_learn($1::jsonb, $2::bigint[])', [JSON.stringify(signals), []]);
        const [row] = await tx.query<{ effective: number }>(`select effective from sluice.levels where queue = 'cap' and lane = '*'`);
        return row!.effective;
      });
    const limits: number[] = [];
    let used = 0;
    for (let limit = 8; limit < 24; ) {
      clock += 100;
      const next = await windowOf(limit);
      used += limit;
      if (next !== limit) movedAt = clock;
      limits.push(next);
      limit = next;
    }
    // One a window for 2 + 30% of its limit windows (twice the climb back from a cut, and two);
    // then a quarter. One a window all the way took 16 windows: 8 + 9 + … + 23 = 248 successes.
    expect(limits).toEqual([9, 10, 11, 12, 13, 16, 20, 25]);
    expect(used).toBe(99);

    // An overload cuts it (to 21, as 85% of 25): the next windows add one each again.
    await t.db.query(`update sluice.levels set effective = 21 where queue = 'cap' and lane = '*'`);
    cutAt = movedAt = clock;
    for (const limit of [21, 22]) {
      clock += 100;
      expect(await windowOf(limit)).toBe(limit + 1);
      movedAt = clock;
    }
    expect(await level('cap', '*')).toMatchObject({ reason: 'raised: a window of successes' });
  });

  it('a push that went unanswered (a timeout) lowers an adaptive level too; its lease stays held', async () => {
    await taskInsertMany(
      t.db,
      Array.from({ length: 8 }, () => newTask({ queue: 'adaptive', runAt: due() })),
    );
    const leased = await claimAt(await dbNow());
    const [late] = leased;
    const push = { taskId: late!.id, queue: 'adaptive', concurrencyKey: null, leasedAt: late!.lease.leasedAt, cause: 'timeout' };
    await levelsLearnUnanswered(t.db, push, ['adaptive']);
    expect(await level('adaptive', '*')).toMatchObject({ effective: 6, reason: 'lowered: timeout' });
    const [row] = await t.db.query<{ status: string }>('select status from sluice.tasks where id = $1', [late!.id]);
    expect(row?.status).toBe('leased');
    // Not adaptive: nothing is learnt.
    await levelsLearnUnanswered(t.db, { ...push, queue: 'fixed' }, ['adaptive']);
    expect(await level('fixed', '*')).toBeUndefined();
  });

  it('a queue that is not adaptive learns nothing: an overload is a failed attempt', async () => {
    await taskInsertMany(t.db, [newTask({ queue: 'fixed', runAt: due() })]);
    const [task] = await claimAt(await dbNow());
    await settle([task!], retry(429), 'overload');
    expect(await level('fixed', '*')).toBeUndefined();
    const [row] = await t.db.query<{ attempts: number; deferrals: number }>('select attempts, deferrals from sluice.tasks where id = $1', [
      task!.id,
    ]);
    expect(row).toEqual({ attempts: 1, deferrals: 0 });
  });

  it('never applies a learnt limit below adaptive_min', async () => {
    await t.db.query(`insert into sluice.queues (name, options) values ('adaptive', '{"adaptive_min": 4}')`);
    await t.db.query(
      `insert into sluice.levels (queue, lane, effective, reason, moved_at) values ('adaptive', '*', 2, 'lowered: HTTP 429', now())`,
    );
    await taskInsertMany(
      t.db,
      Array.from({ length: 10 }, () => newTask({ queue: 'adaptive', runAt: due() })),
    );
    expect(await claimAt(await dbNow())).toHaveLength(4);
    const picture = await concurrencyPicture(config, t.db, 'adaptive');
    expect(picture.queueLevel).toMatchObject({ limit: 8, effective: 4 });
  });

  it('an override turns it on or off at run time', async () => {
    await t.db.query(`insert into sluice.queues (name, options) values ('fixed', '{"adaptive": true}')`);
    await taskInsertMany(
      t.db,
      Array.from({ length: 4 }, () => newTask({ queue: 'fixed', runAt: due() })),
    );
    const leased = await claimAt(await dbNow());
    await settle(leased.slice(0, 1), retry(429), 'overload');
    expect(await level('fixed', '*')).toMatchObject({ effective: 3 });
    await t.db.query(`update sluice.queues set options = '{"adaptive": false}' where name = 'fixed'`);
    await settle(leased.slice(1, 2), retry(429), 'overload');
    const [row] = await t.db.query<{ attempts: number }>('select attempts from sluice.tasks where id = $1', [leased[1]!.id]);
    expect(row?.attempts).toBe(1);
  });
});

describe('racing dispatchers', () => {
  it('8 claimers on their own connections never lease beyond a learnt limit, of a queue or of a key', async () => {
    await taskInsertMany(t.db, [
      ...Array.from({ length: 40 }, () => newTask({ queue: 'adaptive', runAt: due() })),
      ...Array.from({ length: 40 }, (_, n) => newTask({ queue: 'capkeyed', concurrencyKey: n % 2 ? 'a' : 'b', runAt: due() })),
    ]);
    await t.db.query(
      `insert into sluice.levels (queue, lane, effective, reason, moved_at) values
         ('adaptive', '*', 3, 'lowered: HTTP 429', now()), ('capkeyed', 'k:a', 2, 'lowered: HTTP 429', now())`,
    );
    const claimers = Array.from({ length: 8 }, () => openPgDb(t.url, 1));
    try {
      await Promise.all(
        claimers.map(async (db) => {
          for (let i = 0; i < 20; i++) await taskClaimBatch(db, { max: 4, clusterCap: null, queuesJson: config.claimQueuesJson });
        }),
      );
    } finally {
      await Promise.all(claimers.map((db) => db.close()));
    }
    const leased = await t.db.query<{ level: string; n: number }>(
      `select queue || '/' || lane as level, count(*)::int as n from sluice.tasks where status = 'leased' group by 1 order by 1`,
    );
    // The learnt limits (3, and 2 for key a); key b, which learnt nothing, its configured 16.
    expect(leased).toEqual([
      { level: 'adaptive/', n: 3 },
      { level: 'capkeyed/k:a', n: 2 },
      { level: 'capkeyed/k:b', n: 16 },
    ]);
  });
});

describe('retention', () => {
  it('forgets a level that learnt nothing for an hour and is not held; keeps the others', async () => {
    await t.db.query(
      `insert into sluice.levels (queue, lane, effective, held_until, reason, moved_at) values
         ('adaptive', '*', 3, null, 'old', now() - interval '2 hours'),
         ('adaptive', 'k:held', null, now() + interval '1 minute', 'held', now() - interval '2 hours'),
         ('adaptive', 'k:recent', 5, null, 'recent', now() - interval '5 minutes')`,
    );
    expect(await levelsSweep(t.db)).toBe(1);
    const left = await t.db.query<{ lane: string }>('select lane from sluice.levels order by lane');
    expect(left.map((l) => l.lane)).toEqual(['k:held', 'k:recent']);
  });
});

describe('against an endpoint that takes at most C pushes at once', () => {
  /** Answers 429 (no Retry-After) above `capacity` pushes at once; each push it takes lasts `ms`. */
  function capacityEndpoint(capacity: number, ms: number) {
    const seen = { inFlight: 0, over: 0, ok: 0, peak: 0 };
    endpoint.reply(async () => {
      if (seen.inFlight >= capacity) {
        seen.over++;
        return { status: 429, body: 'slow down' };
      }
      seen.inFlight++;
      seen.peak = Math.max(seen.peak, seen.inFlight);
      await new Promise((r) => setTimeout(r, ms));
      seen.inFlight--;
      seen.ok++;
      return { status: 200 };
    });
    return seen;
  }

  async function drain(queue: string, tasks: number, keyOf: (n: number) => string | null) {
    await taskInsertMany(
      t.db,
      Array.from({ length: tasks }, (_, n) => newTask({ queue, url: `${endpoint.url}/${queue}`, concurrencyKey: keyOf(n) })),
    );
    const keyring = await loadKeyring(config.signingKeys);
    const until = Date.now() + 60_000;
    while (Date.now() < until) {
      await dispatchRun({ db: t.db, config, keyring, log: { ...console, warn: () => {} } }, { budgetMs: 2_000 });
      const [left] = await t.db.query<{ n: number }>('select count(*)::int as n from sluice.tasks where queue = $1', [queue]);
      if (left!.n === 0) break;
    }
    return t.db.query<{ status: string; attempts: number; n: number }>(
      `select status, attempts, count(*)::int as n from sluice.all_tasks where queue = $1 group by 1, 2 order by 1, 2`,
      [queue],
    );
  }

  it('a queue of 64 learns to stay near C = 4: every task succeeds on its first attempt', async () => {
    const seen = capacityEndpoint(4, 30);
    const outcome = await drain('cap', 300, () => null);
    expect(outcome).toEqual([{ status: 'succeeded', attempts: 1, n: 300 }]);
    expect(seen.ok).toBe(300);
    // It was overloaded (so it learnt), and it learnt a limit far below 64.
    expect(seen.over).toBeGreaterThan(0);
    const learnt = await level('cap', '*');
    console.info(`node: C = 4, 300 pushes answered 200, ${seen.over} answered 429, learnt limit ${learnt?.effective}, peak ${seen.peak}`);
    expect(learnt?.effective).toBeLessThan(16);
  });

  it('a keyed queue learns per key: a key its endpoint refuses is held down, the others are not', async () => {
    // Key "slow" takes 2 at once, the others 16: only "slow" should learn a low limit.
    const inFlight = new Map<string, number>();
    endpoint.reply(async (push) => {
      const key = decodeURIComponent(String(push.headers['sluice-concurrency-key'] ?? ''));
      const n = inFlight.get(key) ?? 0;
      if (n >= (key === 'slow' ? 2 : 16)) return { status: 429 };
      inFlight.set(key, n + 1);
      await new Promise((r) => setTimeout(r, 20));
      inFlight.set(key, (inFlight.get(key) ?? 1) - 1);
      return { status: 200 };
    });
    const outcome = await drain('capkeyed', 240, (n) => (n % 3 === 0 ? 'slow' : `fast${n % 3}`));
    expect(outcome).toEqual([{ status: 'succeeded', attempts: 1, n: 240 }]);
    const slow = await level('capkeyed', 'k:slow');
    const levels = await t.db.query('select lane, effective, reason from sluice.levels where queue = $1 order by lane', ['capkeyed']);
    console.info(`node: keyed, learnt ${JSON.stringify(levels)}`);
    expect(slow?.effective).toBeLessThanOrEqual(8);
    for (const fast of ['k:fast1', 'k:fast2']) expect((await level('capkeyed', fast))?.effective ?? 16).toBeGreaterThan(slow!.effective!);
  });
});
