/**
 * Endpoint health on a real Postgres (migrations/0027_endpoints.sql): an origin that fails again
 * and again is paused, its tasks parked without using an attempt, one probe pushed after a
 * backoff, a 2xx resuming it; a pause and a resume by hand; the sweep. Claim passes run at a
 * clock the test moves; the settle's times are the database's.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.ts';
import type { EndpointHealth, Settlement } from '../../src/core/outcome.ts';
import type { LeasedTask } from '../../src/core/types.ts';
import { endpointGet, endpointPause, endpointResume, endpointsList, endpointsSweep } from '../../src/db/endpoints.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { levelsLearnUnanswered } from '../../src/db/levels.ts';
import { leaseSettleMany, leaseSettleReport } from '../../src/db/settle.ts';
import { Meter } from '../../src/dispatcher/meter.ts';
import { testConfig } from '../helpers/config.ts';
import { createTestDatabase, emptyTables, type TestDatabase } from '../helpers/db.ts';
import { claimAtMs, dbNowMs, longDue } from '../helpers/moved-clock.ts';
import { newTask } from '../helpers/tasks.ts';

const A = 'https://a.example';
const B = 'https://b.example:8443';

let t: TestDatabase;
let config: Config;

beforeAll(async () => {
  t = await createTestDatabase();
  ({ config } = await testConfig(t.url, { SLUICE_QUEUES: JSON.stringify({ fixed: { concurrency: 8 } }) }));
});
afterAll(async () => {
  await t?.drop();
});
beforeEach(async () => {
  await emptyTables(t.db, 'sluice.tasks, sluice.lanes, sluice.queues, sluice.key_limits');
  await t.db.query('update sluice.promotion set promoted_to = now()');
});

const claimAt = (ms: number, max = 100) => claimAtMs(t.db, config, ms, max);

const failed: Settlement = {
  status: 'pending',
  reason: 'retry',
  runAt: new Date(Date.now() + 1_000),
  attemptsDelta: 0,
  deferralsDelta: 0,
  error: 'HTTP 502: bad gateway',
  httpStatus: 502,
};
const ok: Settlement = { status: 'succeeded', result: null, httpStatus: 200 };
/** A 429 with `Retry-After: 1`, as core/outcome.ts decides it. */
const retryAfter = (): Settlement => ({
  status: 'pending',
  reason: 'deferred',
  runAt: new Date(Date.now() + 1_000),
  attemptsDelta: -1,
  deferralsDelta: 1,
  error: 'deferred by HTTP 429 with Retry-After',
  httpStatus: 429,
});

/**
 * Ends leases as the dispatcher does after each push's answer, with what it says of the origin;
 * and counts the pushes as its meter does (src/dispatcher/record.ts).
 */
async function settle(tasks: readonly LeasedTask[], settlement: Settlement, health: EndpointHealth, pauseAfter = 3) {
  const meter = new Meter();
  for (const task of tasks) meter.attempt(task.url!);
  await meter.write(t.db, { now: Date.now() });
  return leaseSettleReport(
    t.db,
    tasks.map((task) => ({
      taskId: task.id,
      leaseId: task.lease.id,
      leasedAt: task.lease.leasedAt,
      attempt: task.attempts,
      settlement,
      durationMs: 10,
      signal: {
        signal: health === 'hold' ? 'hold' : health === 'ok' ? 'ok' : null,
        queue: task.queue,
        concurrencyKey: task.concurrencyKey,
        deferrals: task.deferrals,
        url: task.url,
        health,
        pauseAfter,
      },
    })),
    [],
    true,
    Date.now(),
  );
}

const rows = (origin: string) =>
  t.db.query<{ id: string; held: boolean; attempts: number; status: string; run_at: Date }>(
    `select id::text, held, attempts, status, run_at from sluice.tasks where sluice.url_origin(url) = $1 order by id`,
    [origin],
  );

describe('the origin of a URL', () => {
  it('is its scheme, host and port, as new URL(url).origin says it of the stored href', async () => {
    const urls = [
      'https://a.example/hook?x=1',
      'http://127.0.0.1:8788/echo?fail=1',
      'https://user:pw@b.example:8443/x#y',
      'http://[::1]:3000/',
      'https://c.example',
    ];
    const [row] = await t.db.query<{ origins: string[] }>(
      'select array(select sluice.url_origin(u) from unnest($1::text[]) u) as origins',
      [urls.map((u) => new URL(u).href)],
    );
    expect(row?.origins).toEqual(urls.map((u) => new URL(u).origin));
  });
});

describe('an origin that fails again and again', () => {
  it('is paused after SLUICE_ENDPOINT_PAUSE_AFTER failures in a row: its tasks wait without using an attempt, others go', async () => {
    await taskInsertMany(t.db, [
      ...Array.from({ length: 6 }, (_, n) => newTask({ queue: 'fixed', url: `${A}/hook/${n}`, runAt: longDue() })),
      newTask({ queue: 'fixed', url: `${B}/hook`, runAt: longDue() }),
    ]);
    const start = await dbNowMs(t.db);
    const first = await claimAt(start, 3);
    expect(first.map((x) => new URL(x.url!).origin)).toEqual([A, A, A]);
    // Two failures, then a 2xx: the run starts again; then three in a row pause it.
    await settle(first.slice(0, 2), failed, 'fail');
    expect(await endpointGet(t.db, A)).toMatchObject({ state: 'healthy', consecutiveFailures: 2 });
    await settle(first.slice(2), ok, 'ok');
    expect(await endpointGet(t.db, A)).toMatchObject({ state: 'healthy', consecutiveFailures: 0, attempts5m: 3, failures5m: 2 });
    const again = await claimAt(start + 2_000, 3);
    expect(again.map((x) => new URL(x.url!).origin)).toEqual([A, A, A]);
    const pausedAt = await dbNowMs(t.db);
    await settle(again, failed, 'fail');
    const paused = await endpointGet(t.db, A);
    expect(paused).toMatchObject({ state: 'paused', pausedBy: 'failures', consecutiveFailures: 3, lastError: 'HTTP 502: bad gateway' });
    // The first probe 5 s after the pause.
    expect(paused!.pausedUntil!.getTime() - pausedAt).toBeGreaterThan(4_990);
    expect(paused!.pausedUntil!.getTime() - pausedAt).toBeLessThan(6_000);

    // Meanwhile its tasks are parked until the probe's time (their attempts untouched), and B's goes.
    const during = await claimAt(start + 3_500);
    expect(during.map((x) => new URL(x.url!).origin)).toEqual([B]);
    const parked = await rows(A);
    expect(parked.filter((r) => r.held).length).toBeGreaterThanOrEqual(3);
    for (const r of parked.filter((r) => r.held)) {
      expect(r.run_at.getTime()).toBe(paused!.pausedUntil!.getTime());
      expect(r.attempts).toBeLessThanOrEqual(1);
    }
    // A parked task is not looked at again by a pass before then.
    const before = await t.db.query<{ updated_at: Date }>('select updated_at from sluice.tasks where held order by id');
    expect(await claimAt(start + 4_000)).toEqual([]);
    expect(await t.db.query<{ updated_at: Date }>('select updated_at from sluice.tasks where held order by id')).toEqual(before);

    // Its probe's time: one task goes, the rest wait for its answer.
    const probeAt = paused!.pausedUntil!.getTime() + 1_000;
    const probe = await claimAt(probeAt);
    expect(probe).toHaveLength(1);
    expect(await endpointGet(t.db, A)).toMatchObject({ state: 'probing' });
    expect(await claimAt(probeAt + 100)).toEqual([]);

    // The probe fails: the next one is further off (10 s).
    const failedAt = await dbNowMs(t.db);
    await settle(probe, failed, 'fail');
    const repaused = await endpointGet(t.db, A);
    expect(repaused).toMatchObject({ state: 'paused', consecutiveFailures: 4 });
    expect(repaused!.pausedUntil!.getTime() - failedAt).toBeGreaterThan(9_990);
    expect(repaused!.pausedUntil!.getTime() - failedAt).toBeLessThan(11_000);

    // The next probe succeeds: A is resumed, and every task parked behind it is due at once.
    const second = await claimAt(repaused!.pausedUntil!.getTime() + 1_000);
    expect(second).toHaveLength(1);
    const report = await settle(second, ok, 'ok');
    expect(report.workWaits).toBe(true);
    expect(await endpointGet(t.db, A)).toMatchObject({ state: 'healthy', consecutiveFailures: 0, pausedUntil: null });
    expect((await rows(A)).filter((r) => r.held)).toEqual([]);
    const rest = await claimAt((await dbNowMs(t.db)) + 100);
    expect(rest.length).toBe((await rows(A)).length);
    // Waits behind a pause used no attempt: each task has used the attempts of its own pushes.
    for (const task of rest) expect(task.attempts).toBeLessThanOrEqual(3);
  });

  it('counts a push that went unanswered (a timeout) as a failure', async () => {
    await taskInsertMany(t.db, [newTask({ queue: 'fixed', url: `${A}/slow`, runAt: longDue() })]);
    const [task] = await claimAt(await dbNowMs(t.db));
    for (let n = 0; n < 2; n++) {
      await levelsLearnUnanswered(
        t.db,
        { taskId: task!.id, queue: 'fixed', concurrencyKey: null, leasedAt: task!.lease.leasedAt, cause: 'timeout', url: task!.url },
        [],
        2,
      );
    }
    expect(await endpointGet(t.db, A)).toMatchObject({ state: 'paused', consecutiveFailures: 2, lastError: 'push timeout' });
  });

  it('never pauses on a 4xx, nor with SLUICE_ENDPOINT_PAUSE_AFTER=0', async () => {
    await taskInsertMany(
      t.db,
      Array.from({ length: 8 }, () => newTask({ queue: 'fixed', url: `${A}/x`, runAt: longDue() })),
    );
    const tasks = await claimAt(await dbNowMs(t.db));
    const notFound: Settlement = { ...failed, error: 'HTTP 404', httpStatus: 404 };
    await settle(tasks.slice(0, 4), notFound, 'other', 2);
    expect(await endpointGet(t.db, A)).toMatchObject({ state: 'healthy', consecutiveFailures: 0, attempts5m: 4, failures5m: 0 });
    await settle(tasks.slice(4), failed, 'fail', 0);
    expect(await endpointGet(t.db, A)).toMatchObject({ state: 'healthy', consecutiveFailures: 4, failures5m: 4 });
  });
});

describe('by hand', () => {
  it('a pause holds an origin with no probe until a resume, which makes its tasks due at once', async () => {
    await endpointPause(t.db, A);
    await taskInsertMany(t.db, [
      newTask({ queue: 'fixed', url: `${A}/1`, runAt: longDue() }),
      newTask({ queue: 'fixed', url: `${B}/1`, runAt: longDue() }),
    ]);
    const start = await dbNowMs(t.db);
    expect((await claimAt(start)).map((x) => new URL(x.url!).origin)).toEqual([B]);
    expect(await endpointGet(t.db, A)).toMatchObject({ state: 'paused', pausedBy: 'hand', pausedUntil: null });
    // No probe however long it waits (a parked task is looked at again within the hour).
    expect(await claimAt(start + 3_600_000 + 1_000)).toEqual([]);
    expect(await endpointResume(t.db, A)).toBe(true);
    expect(await endpointResume(t.db, 'https://unknown.example')).toBe(false);
    expect((await claimAt((await dbNowMs(t.db)) + 100)).map((x) => new URL(x.url!).origin)).toEqual([A]);
    expect((await endpointsList(t.db)).map((e) => [e.origin, e.state])).toEqual([[A, 'healthy']]);
  });

  it('the sweep drops old minutes and idle healthy origins, never a paused one', async () => {
    await endpointPause(t.db, A);
    await t.db.query(`insert into sluice.endpoints (origin, touched_at) values ($1, now() - interval '2 hours')`, [B]);
    await t.db.query(
      `insert into sluice.endpoint_minutes (origin, minute, attempts) values ($1, date_trunc('minute', now()) - interval '10 minutes', 5),
                                                                             ($1, date_trunc('minute', now()), 1)`,
      [A],
    );
    await t.db.query(`update sluice.endpoints set touched_at = now() - interval '2 hours'`);
    await endpointsSweep(t.db);
    expect((await endpointsList(t.db)).map((e) => [e.origin, e.attempts5m])).toEqual([[A, 1]]);
    const [minutes] = await t.db.query<{ n: number }>('select count(*)::int as n from sluice.endpoint_minutes');
    expect(minutes?.n).toBe(1);
  });
});

describe('a Retry-After', () => {
  it('holds the origin that sent it, not the queue: a task to another origin is pushed on time', async () => {
    // The README's case: a retry due 0.2 s later, to another origin, while a 429 Retry-After: 1 holds the first.
    await taskInsertMany(t.db, [newTask({ queue: 'fixed', url: `${A}/echo?retry_after=1`, runAt: longDue() })]);
    const start = await dbNowMs(t.db);
    const [held] = await claimAt(start);
    await taskInsertMany(t.db, [
      newTask({ queue: 'fixed', url: `${B}/echo?fail=1`, runAt: new Date(start + 200) }),
      newTask({ queue: 'fixed', url: `${A}/echo`, runAt: new Date(start + 200) }),
    ]);
    await settle([held!], retryAfter(), 'hold');
    expect((await endpointGet(t.db, A))?.heldUntil?.getTime()).toBeGreaterThan(start + 900);
    const onTime = await claimAt(start + 250);
    expect(onTime.map((x) => x.url)).toEqual([`${B}/echo?fail=1`]);
    expect(await claimAt(start + 600)).toEqual([]);
    const after = await claimAt(start + 2_000);
    expect(after.map((x) => new URL(x.url!).origin)).toEqual([A, A]);
    // The queue was never held.
    const [queueLevel] = await t.db.query(`select * from sluice.levels where queue = 'fixed' and lane = '*'`);
    expect(queueLevel).toBeUndefined();
  });

  it('holds the key too when the task has one', async () => {
    await taskInsertMany(t.db, [newTask({ queue: 'fixed', url: `${A}/k`, concurrencyKey: 'k', runAt: longDue() })]);
    const start = await dbNowMs(t.db);
    const [held] = await claimAt(start);
    await taskInsertMany(t.db, [newTask({ queue: 'fixed', url: `${B}/k`, concurrencyKey: 'k', runAt: longDue() })]);
    await settle([held!], retryAfter(), 'hold');
    const [level] = await t.db.query<{ held: boolean }>(`select held_until > now() as held from sluice.levels where lane = 'k:k'`);
    expect(level?.held).toBe(true);
    expect(await claimAt(start + 300)).toEqual([]);
  });
});

describe('at volume', () => {
  it('a held origin at the head of a lane is parked once, not read by every pass', async () => {
    await taskInsertMany(
      t.db,
      Array.from({ length: 400 }, (_, n) => newTask({ queue: 'default', url: `${A}/${n}`, runAt: longDue() })),
    );
    await taskInsertMany(t.db, [newTask({ queue: 'default', url: `${B}/after`, runAt: longDue() })]);
    await endpointPause(t.db, A);
    const start = await dbNowMs(t.db);
    const found: LeasedTask[] = [];
    let passes = 0;
    while (found.length === 0 && passes < 20) {
      passes++;
      found.push(...(await claimAt(start + passes, 32)));
    }
    expect(found.map((x) => x.url)).toEqual([`${B}/after`]);
    const [held] = await t.db.query<{ n: number }>('select count(*)::int as n from sluice.tasks where held');
    expect(held?.n).toBe(400);
    // Each pass parks up to its rounds' worth (4 × 32); none is read twice.
    expect(passes).toBeLessThanOrEqual(Math.ceil(400 / (4 * 32)) + 1);
    await leaseSettleMany(t.db, [], []);
  });
});
