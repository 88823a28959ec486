/**
 * Retention against a real Postgres (migrations/0014_history.sql): a finished task leaves the
 * hot table in the statement that finishes it, and history goes a bucket at a time, whole.
 * Sweeps are given their clock, so hours and days pass without waiting.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.ts';
import { taskClaimBatch } from '../../src/db/claim.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { taskAttempts } from '../../src/db/leases.ts';
import { queueNamesKnown } from '../../src/db/queues.ts';
import { lanesSweep } from '../../src/db/retention.ts';
import { taskCancel, taskGet, taskRedrive } from '../../src/db/tasks.ts';
import { leaseWait } from '../../src/db/waits.ts';
import { bucketWidthMs, keepMs, sweepFinished } from '../../src/dispatcher/retention.ts';
import { dispatchRun } from '../../src/dispatcher/run.ts';
import type { Keyring } from '../../src/security/keyring.ts';
import type { TestDatabase } from '../helpers/db.ts';
import type { TestEndpoint } from '../helpers/endpoint.ts';
import { useDispatchFixture } from '../helpers/fixture.ts';
import { newTask } from '../helpers/tasks.ts';

const f = useDispatchFixture();
let t: TestDatabase;
let endpoint: TestEndpoint;
let config: Config;
let keyring: Keyring;
beforeAll(() => {
  ({ t, endpoint, config, keyring } = f);
});

const DAY = 86_400_000;
const enqueue = async (overrides: Parameters<typeof newTask>[0] = {}) =>
  (await taskInsertMany(t.db, [newTask({ url: `${endpoint.url}/hook`, ...overrides })]))[0]!.task;
const after = (d: Date, ms: number) => new Date(d.getTime() + ms);

async function openBucket(): Promise<{ bucket: number; openedAt: Date }> {
  const [row] = await t.db.query<{ bucket: string; opened_at: Date }>(
    'select bucket::text, opened_at from sluice.history_buckets order by bucket desc limit 1',
  );
  return { bucket: Number(row!.bucket), openedAt: row!.opened_at };
}
const hot = async () => (await t.db.query<{ id: string }>('select id::text from sluice.tasks order by id')).map((r) => r.id);
const all = async () => (await t.db.query<{ id: string }>('select id::text from sluice.all_tasks order by id')).map((r) => r.id);

describe('a finished task', () => {
  it('leaves the hot table as it finishes, and reads the same from history', async () => {
    let calls = 0;
    endpoint.reply(() => (++calls === 1 ? { status: 500, body: 'boom' } : { status: 200, body: '{"ok":true}' }));
    const task = await enqueue({ backoff: { initialMs: 1, maxMs: 1, factor: 1, jitter: 0 } });
    const deps = { db: t.db, config, keyring };
    // The retry comes due within the run (1 ms): pushed twice, then it is gone from the hot table.
    await expect.poll(async () => (await dispatchRun(deps, { budgetMs: 5_000 })).claimed === 0 && (await hot()).length === 0).toBe(true);
    expect(calls).toBe(2);

    const done = await taskGet(t.db, task.id);
    expect(done).toMatchObject({ status: 'succeeded', attempts: 2, result: '{"ok":true}', lastStatus: 200, lease: null });
    expect(done?.finishedAt).toBeInstanceOf(Date);
    const attempts = await taskAttempts(t.db, task.id);
    expect(attempts.map((a) => [a.attempt, a.outcome, a.httpStatus])).toEqual([
      [1, 'retry', 500],
      [2, 'succeeded', 200],
    ]);
    expect(attempts[1]!.leaseId).not.toBe(attempts[0]!.leaseId);
    // Nothing is left behind in the live attempts.
    expect(await t.db.query('select 1 from sluice.attempts')).toHaveLength(0);
  });

  it('redriven, comes back to the hot table with the attempts it had', async () => {
    endpoint.reply(() => ({ status: 500, body: 'down' }));
    const task = await enqueue({ maxAttempts: 1 });
    const deps = { db: t.db, config, keyring };
    await expect
      .poll(async () => {
        await dispatchRun(deps, { budgetMs: 5_000 });
        return (await taskGet(t.db, task.id))?.status;
      })
      .toBe('dead');
    const before = await taskAttempts(t.db, task.id);
    expect(before.map((a) => [a.attempt, a.outcome, a.httpStatus])).toEqual([[1, 'dead', 500]]);
    await taskRedrive(t.db, task.id);
    expect(await hot()).toEqual([task.id]);
    expect(await t.db.query('select 1 from sluice.finished')).toHaveLength(0);
    expect(await taskAttempts(t.db, task.id)).toEqual(before);
    expect(await taskGet(t.db, task.id)).toMatchObject({ status: 'pending', attempts: 0, lastStatus: 500 });
  });
});

describe('a sweep', () => {
  it('drops the buckets closed longer ago than the window, whole, and nothing else', async () => {
    const window = { retentionMs: 7 * DAY, maxLeaseMs: config.maxLeaseMs };
    const old = await Promise.all([enqueue(), enqueue()]);
    const live = await enqueue({ delayMs: 3_600_000 });
    await t.db.query(
      `insert into sluice.attempts (task_id, attempt, lease_id, started_at, outcome) values ($1, 1, gen_random_uuid(), now(), 'released')`,
      [old[0]!.id],
    );
    for (const o of old) await taskCancel(t.db, o.id);
    const first = await openBucket();

    // The open bucket closes once it is a width old; what finishes then goes to the next. (The
    // database keeps microseconds, a Date milliseconds: a millisecond more is past the width.)
    const turned = after(first.openedAt, bucketWidthMs(window) + 1);
    expect(await sweepFinished(t.db, window, after(turned, -1_000))).toMatchObject({ opened: null, dropped: [] });
    expect(await sweepFinished(t.db, window, turned)).toMatchObject({ opened: first.bucket + 1, dropped: [] });
    const recent = await enqueue();
    await taskCancel(t.db, recent.id);

    const keep = keepMs(window)!;
    expect(await sweepFinished(t.db, window, after(turned, keep - 1_000))).toMatchObject({ dropped: [] });
    expect(await all()).toEqual([old[0]!.id, old[1]!.id, live.id, recent.id].sort((a, b) => Number(a) - Number(b)));
    expect(await sweepFinished(t.db, window, after(turned, keep))).toMatchObject({ dropped: [first.bucket] });
    expect(await all()).toEqual([live.id, recent.id]);
    expect(await hot()).toEqual([live.id]);
    expect(await t.db.query('select 1 from sluice.all_attempts')).toHaveLength(0);
    const [gone] = await t.db.query<{ table: string | null }>('select to_regclass($1)::text as table', [`sluice.finished_${first.bucket}`]);
    expect(gone!.table).toBeNull();
  });

  it('drops nothing when kept for ever, nor sooner than a lease can last', async () => {
    const many = await taskInsertMany(
      t.db,
      Array.from({ length: 30 }, () => newTask({ url: `${endpoint.url}/x` })),
    );
    for (const m of many) await taskCancel(t.db, m.task.id);
    // Buckets an earlier test left behind may go; this one's may not until its time.
    const { bucket: mine, openedAt } = await openBucket();
    const forever = { retentionMs: null, maxLeaseMs: config.maxLeaseMs };
    const far = after(openedAt, 400 * DAY);
    expect((await sweepFinished(t.db, forever, far)).dropped).not.toContain(mine);
    expect((await sweepFinished(t.db, forever, after(far, 400 * DAY))).dropped).not.toContain(mine);
    expect(await all()).toHaveLength(30);
    // Kept at least as long as a lease can last, whatever the window says.
    const leaseLong = { retentionMs: 60_000, maxLeaseMs: 2 * DAY };
    expect((await sweepFinished(t.db, leaseLong, after(far, 2 * DAY - 1_000))).dropped).not.toContain(mine);
    expect((await sweepFinished(t.db, leaseLong, after(far, 2 * DAY))).dropped).toContain(mine);
    expect(await all()).toHaveLength(0);
  });

  it('moves rows an earlier version finished in place into history', async () => {
    const task = await enqueue();
    await t.db.query(
      `insert into sluice.attempts (task_id, attempt, lease_id, started_at, outcome, http_status) values ($1, 1, gen_random_uuid(), now(), 'succeeded', 200)`,
      [task.id],
    );
    await t.db.query(
      `update sluice.tasks set status = 'succeeded', attempts = 1, finished_at = now(), last_status = 200, result = 'done' where id = $1`,
      [task.id],
    );
    expect(await sweepFinished(t.db, { retentionMs: 7 * DAY, maxLeaseMs: config.maxLeaseMs })).toMatchObject({ stragglers: 1 });
    expect(await hot()).toEqual([]);
    expect(await taskGet(t.db, task.id)).toMatchObject({ status: 'succeeded', attempts: 1, result: 'done', lastStatus: 200 });
    expect((await taskAttempts(t.db, task.id)).map((a) => a.outcome)).toEqual(['succeeded']);
  });
});

describe('the lanes of keys', () => {
  const lanes = async (queue: string) =>
    (await t.db.query<{ lane: string }>('select lane from sluice.lanes where queue = $1 order by lane', [queue])).map((r) => r.lane);
  const claim = (max: number) => taskClaimBatch(t.db, { max, clusterCap: null, queuesJson: '{}' });

  it('go once no unfinished task is in them for a minute, and come back with the next one', async () => {
    await t.db.query('truncate sluice.tasks, sluice.finished, sluice.attempts, sluice.lanes cascade');
    const keyed = (key: string, overrides: Parameters<typeof newTask>[0] = {}) =>
      enqueue({ queue: 'lanes', concurrencyKey: key, ...overrides });
    // Leased: its task is claimed and held. Waiting: its task waits for a child (in its own key).
    const leased = await keyed('leased');
    const parent = await keyed('waiting');
    const [held, waiter] = await claim(10);
    expect([held!.id, waiter!.id].sort()).toEqual([leased.id, parent.id].sort());
    const child = await keyed('child', { parentId: parent.id });
    expect(await leaseWait(t.db, waiter!.id, waiter!.lease.id, null, '{}')).toMatchObject({ kind: 'waiting' });
    // Pending, due and due in an hour; finished, cancelled before its push.
    const due = await keyed('due');
    await keyed('later', { runAt: new Date(Date.now() + 3_600_000) });
    await taskCancel(t.db, (await keyed('finished')).id);
    await taskCancel(t.db, (await enqueue({ queue: 'keys-only', concurrencyKey: 'gone' })).id);
    expect(await lanes('lanes')).toEqual(['k:child', 'k:due', 'k:finished', 'k:later', 'k:leased', 'k:waiting']);

    // Only the lanes no unfinished task is in go, once nothing touched them for a minute; each
    // queue keeps (or gets) its lane '', and stays known.
    const inAMinute = new Date(Date.now() + 61_000);
    expect(await lanesSweep(t.db)).toBe(0);
    expect(await lanesSweep(t.db, { now: new Date(Date.now() + 30_000) })).toBe(0);
    expect(await lanesSweep(t.db, { now: inAMinute })).toBe(2);
    expect(await lanes('lanes')).toEqual(['', 'k:child', 'k:due', 'k:later', 'k:leased', 'k:waiting']);
    expect(await lanes('keys-only')).toEqual(['']);
    expect(await queueNamesKnown(t.db)).toEqual(expect.arrayContaining(['lanes', 'keys-only']));
    expect(await lanesSweep(t.db, { now: inAMinute })).toBe(0);

    // A key back after its lane went gets a new one from its enqueue, and its task is claimed.
    const back = await keyed('finished');
    expect(await lanes('lanes')).toContain('k:finished');
    expect((await claim(10)).map((c) => c.id).sort()).toEqual([back.id, child.id, due.id].sort());
  });

  it('go in statements of a bounded size, as many as there are', async () => {
    await t.db.query('truncate sluice.tasks, sluice.finished, sluice.attempts, sluice.lanes cascade');
    const tasks = await taskInsertMany(
      t.db,
      Array.from({ length: 25 }, (_, i) => newTask({ queue: 'many', concurrencyKey: `k${i}` })),
    );
    for (const { task } of tasks) await taskCancel(t.db, task.id);
    expect(await lanesSweep(t.db, { perStatement: 10, idleMs: 0 })).toBe(25);
    expect(await lanes('many')).toEqual(['']);
  });
});
