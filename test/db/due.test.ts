/**
 * Due-time dispatch against a real Postgres: the next-due probe, and what a run reports so
 * that its caller can sleep until then (docs/DESIGN.md §6).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.ts';
import { taskClaimBatch } from '../../src/db/claim.ts';
import { nextDueInMs } from '../../src/db/due.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { BUSY_REPEAT_MS, dispatchRun } from '../../src/dispatcher/run.ts';
import { DUE_EVENT, type RunOptions } from '../../src/dispatcher/run-options.ts';
import { systemTimers } from '../../src/dispatcher/timers.ts';
import type { Keyring } from '../../src/security/keyring.ts';
import type { TestDatabase } from '../helpers/db.ts';
import type { TestEndpoint } from '../helpers/endpoint.ts';
import { useDispatchFixture } from '../helpers/fixture.ts';
import { newTask } from '../helpers/tasks.ts';

const f = useDispatchFixture({ SLUICE_DISPATCH_PARALLELISM: '2' });
let t: TestDatabase;
let endpoint: TestEndpoint;
let config: Config;
let keyring: Keyring;
beforeAll(() => {
  ({ t, endpoint, config, keyring } = f);
});

const enqueue = async (overrides: Parameters<typeof newTask>[0] = {}) =>
  (await taskInsertMany(t.db, [newTask({ url: `${endpoint.url}/hook`, ...overrides })]))[0]!.task;
const run = (options: Partial<RunOptions> = {}, overrides: Partial<Config> = {}) =>
  dispatchRun({ db: t.db, config: { ...config, ...overrides }, keyring }, { budgetMs: 10_000, ...options });

describe('nextDueInMs', () => {
  it('is null when nothing waits on time', async () => {
    expect(await nextDueInMs(t.db)).toBeNull();
    await enqueue(); // due now: a poke's business, not a timer's
    expect(await nextDueInMs(t.db)).toBeNull();
  });

  it('is the earliest future run_at of a pending task', async () => {
    await enqueue({ delayMs: 60_000 });
    await enqueue({ delayMs: 5_000 });
    const due = await nextDueInMs(t.db);
    expect(due).toBeGreaterThan(4_000);
    expect(due).toBeLessThanOrEqual(5_000);
  });

  it('is the earliest lease expiry, 0 once a lease has expired', async () => {
    await enqueue({ delayMs: 60_000 });
    await enqueue({ leaseMs: 20_000, timeoutMs: 1_000 });
    await t.db.query(`update sluice.tasks set status = 'leased', lease_id = gen_random_uuid(), leased_at = now(),
      lease_expires_at = now() + interval '20 seconds', attempts = 1 where run_at <= now()`);
    const due = await nextDueInMs(t.db);
    expect(due).toBeGreaterThan(19_000);
    expect(due).toBeLessThanOrEqual(20_000);
    await t.db.query(`update sluice.tasks set leased_at = now() - interval '1 minute', lease_expires_at = now() - interval '1 second'
      where status = 'leased'`);
    expect(await nextDueInMs(t.db)).toBe(0);
  });

  it("a pull consumer's pass does not hide a pushed task that came due from the dispatcher", async () => {
    const task = await enqueue({ delayMs: 60_000 });
    // It came due a moment ago, after the dispatcher's last pass.
    await t.db.query(
      `update sluice.tasks set created_at = now() - interval '2 seconds', run_at = now() - interval '1 second' where id = $1`,
      [task.id],
    );
    expect(await nextDueInMs(t.db)).toBe(0);
    // A consumer of another queue claims (nothing): only the dispatcher would push the task, so
    // it stays due now for the dispatcher's probe.
    expect(await taskClaimBatch(t.db, { max: 10, clusterCap: null, queuesJson: '{"inbox":{"pull":true}}', pull: 'inbox' })).toEqual([]);
    expect(await nextDueInMs(t.db)).toBe(0);
    // The dispatcher's own pass takes it, and then nothing waits on time.
    expect(await taskClaimBatch(t.db, { max: 10, clusterCap: null, queuesJson: '{}' })).toMatchObject([{ id: task.id }]);
  });

  it('does not count finished tasks, or due tasks held back by a limit', async () => {
    const done = await enqueue({ delayMs: 1_000 });
    await t.db.query(`update sluice.tasks set status = 'cancelled', finished_at = now() where id = $1`, [done.id]);
    await enqueue({ queue: 'held', delayMs: 0 });
    await t.db.query(`insert into sluice.queues (name, paused) values ('held', true)`);
    expect(await nextDueInMs(t.db)).toBeNull();
  });
});

describe('the claim on a clock it is given', () => {
  it('claims a task delayed an hour when told it is an hour later, without waiting an hour', async () => {
    const task = await enqueue({ delayMs: 3_600_000 });
    expect(await taskClaimBatch(t.db, { max: 10, clusterCap: null, queuesJson: '{}' })).toEqual([]);
    const later = new Date(Date.now() + 3_600_000 + 1_000);
    const [claimed] = await taskClaimBatch(t.db, { max: 10, clusterCap: null, queuesJson: '{}', now: later });
    expect(claimed).toMatchObject({ id: task.id, status: 'leased' });
    expect(claimed!.lease.leasedAt.getTime()).toBe(later.getTime());
  });
});

describe('a run reports when to wake', () => {
  it('ends with the next due time when nothing more is claimable', async () => {
    await enqueue();
    await enqueue({ delayMs: 30_000 });
    const report = await run();
    expect(report).toMatchObject({ claimed: 1, succeeded: 1, more: false });
    expect(report.nextDueInMs).toBeGreaterThan(29_000);
  });

  it('a retry it settles is part of the next due time', async () => {
    endpoint.reply(() => ({ status: 500 }));
    await enqueue({ backoff: { initialMs: 2_000, maxMs: 2_000, factor: 1, jitter: 0 } });
    const report = await run();
    expect(report).toMatchObject({ retried: 1, more: false });
    expect(report.nextDueInMs).toBeGreaterThan(1_000);
    expect(report.nextDueInMs).toBeLessThanOrEqual(2_000);
  });

  it('stopped by its push budget with work left, it says so instead of sleeping', async () => {
    await taskInsertMany(
      t.db,
      Array.from({ length: 5 }, () => newTask({ url: `${endpoint.url}/hook` })),
    );
    const report = await run({ maxPushes: 3 });
    expect(report).toMatchObject({ claimed: 3, more: true, nextDueInMs: null });
  });

  it('calls onBusy once when a claim pass fills every place', async () => {
    endpoint.reply(() => ({ status: 200, delayMs: 100 }));
    await taskInsertMany(
      t.db,
      Array.from({ length: 6 }, () => newTask({ url: `${endpoint.url}/hook` })),
    );
    let busy = 0;
    const report = await run({ onBusy: () => busy++ });
    expect(report.claimed).toBe(6);
    expect(busy).toBe(1);
    // Not busy: fewer tasks than places.
    await enqueue();
    expect((await run({ onBusy: () => busy++ })).claimed).toBe(1);
    expect(busy).toBe(1);
  });

  it('calls onBusy again, at most every BUSY_REPEAT_MS, while its passes keep filling every place', async () => {
    endpoint.reply(() => ({ status: 200, delayMs: 20 }));
    await taskInsertMany(
      t.db,
      Array.from({ length: 12 }, () => newTask({ url: `${endpoint.url}/hook` })),
    );
    // The clock moves on by BUSY_REPEAT_MS each time the run says it is busy.
    let skew = 0;
    let busy = 0;
    const timers = { ...systemTimers, now: () => Date.now() + skew };
    await dispatchRun(
      { db: t.db, config: { ...config, dispatchParallelism: 3 }, keyring, timers },
      {
        budgetMs: 60_000,
        onBusy: () => {
          busy++;
          skew += BUSY_REPEAT_MS;
        },
      },
    );
    expect(busy).toBeGreaterThan(1);
  });

  it('a nudge makes a run waiting on a slow push claim what came due meanwhile', async () => {
    // The slow push is answered only once the fast one has arrived (or after 5 s): without the
    // nudge, the fast task would wait for the slow push to end.
    let overlapped = false;
    endpoint.reply(async (push) => {
      if (push.path !== '/slow') return { status: 200 };
      const until = Date.now() + 5_000;
      while (Date.now() < until && !endpoint.received.some((p) => p.path === '/fast')) await new Promise((r) => setTimeout(r, 10));
      overlapped = endpoint.received.some((p) => p.path === '/fast');
      return { status: 200 };
    });
    await enqueue({ url: `${endpoint.url}/slow` });
    const nudges = new EventTarget();
    const running = run({ nudges }, { dispatchParallelism: 2 });
    await endpoint.waitFor(1);
    await enqueue({ url: `${endpoint.url}/fast` });
    nudges.dispatchEvent(new Event(DUE_EVENT));
    expect((await running).claimed).toBe(2);
    expect(overlapped).toBe(true);
  });

  it('a task that comes due between the last claim pass and the probe is due now, not forgotten', async () => {
    // Due a moment after this run's last claim: the probe must not skip it as "past".
    const report = await run();
    expect(report.claimed).toBe(0);
    await enqueue({ delayMs: 30 });
    await new Promise((r) => setTimeout(r, 60));
    expect(await nextDueInMs(t.db)).toBe(0);
    // A claim pass sees it (and takes it): then nothing is due.
    expect((await run()).claimed).toBe(1);
    expect(await nextDueInMs(t.db)).toBeNull();
  });

  it('a slot freed while a claim pass runs is claimed again, not forgotten', async () => {
    // Queue "one" takes one at a time. A (in "one") and C (elsewhere) are pushed; C ends, and
    // while the claim pass that follows is in flight, A ends and frees the slot B waits for.
    await t.db.query(`insert into sluice.queues (name, options) values ('one', '{"concurrency": 1}')`);
    endpoint.reply((push) => ({ status: 200, delayMs: push.path === '/a' ? 150 : 100 }));
    await enqueue({ queue: 'one', url: `${endpoint.url}/a` });
    await enqueue({ queue: 'one', url: `${endpoint.url}/b` });
    await enqueue({ queue: 'other', url: `${endpoint.url}/c` });
    // Every claim pass after the first is slowed by 100 ms, so A ends during one of them.
    const slowDb = {
      ...t.db,
      query: async <R>(text: string, params?: readonly unknown[]) => {
        const rows = await t.db.query<R>(text, params);
        if (text.includes('sluice.claim')) await new Promise((r) => setTimeout(r, 100));
        return rows;
      },
    };
    const report = await dispatchRun({ db: slowDb, config: { ...config, dispatchParallelism: 2 }, keyring }, { budgetMs: 10_000 });
    expect(report.claimed).toBe(3);
    expect(endpoint.received.map((p) => p.path).sort()).toEqual(['/a', '/b', '/c']);
  });

  it('a nudge while every place is taken waits for a push to end instead of spinning', async () => {
    // A spinning run would block this process, and with it the endpoint's answer: a hang.
    endpoint.reply(() => ({ status: 200, delayMs: 300 }));
    await enqueue();
    await enqueue();
    const nudges = new EventTarget();
    const running = run({ nudges }, { dispatchParallelism: 1 });
    await endpoint.waitFor(1);
    nudges.dispatchEvent(new Event(DUE_EVENT));
    expect(await running).toMatchObject({ claimed: 2, succeeded: 2 });
  });

  it('an aborted run claims nothing more but settles the pushes it made', async () => {
    endpoint.reply(() => ({ status: 200, delayMs: 300 }));
    await enqueue();
    const abort = new AbortController();
    const running = run({ signal: abort.signal }, { dispatchParallelism: 1 });
    await endpoint.waitFor(1);
    await enqueue();
    abort.abort();
    const report = await running;
    expect(report).toMatchObject({ claimed: 1, succeeded: 1 });
    const statuses = await t.db.query<{ status: string }>('select status from sluice.all_tasks order by id');
    expect(statuses.map((r) => r.status)).toEqual(['succeeded', 'pending']);
  });
});
