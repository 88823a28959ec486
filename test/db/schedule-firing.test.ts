/**
 * Schedules firing on a real Postgres, with a clock the test moves: catch-up after downtime,
 * DST, overlap policies, pause/resume/delete, and exactly one task per slot with dispatchers
 * racing (schedules.test.ts has the API and the Node server).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { taskClaimBatch } from '../../src/db/claim.ts';
import { nextDueInMs } from '../../src/db/due.ts';
import { keyLimitDelete, keyLimitPut } from '../../src/db/queues.ts';
import { scheduleGet } from '../../src/db/schedules.ts';
import { fireDueSchedules } from '../../src/dispatcher/fire-schedules.ts';
import { DispatchLoop } from '../../src/dispatcher/loop.ts';
import { dispatchRun } from '../../src/dispatcher/run.ts';
import { openPgDb } from '../../src/node/pg-db.ts';
import { loadKeyring } from '../../src/security/keyring.ts';
import { testConfig } from '../helpers/config.ts';
import type { TestDatabase } from '../helpers/db.ts';
import type { TestEndpoint } from '../helpers/endpoint.ts';
import { iso, NO_POLL, useSchedules } from '../helpers/schedules.ts';

const { fixture, call, schedule, insertSchedule, fired, finish } = useSchedules();
let t: TestDatabase;
let endpoint: TestEndpoint;
beforeAll(() => {
  ({ t, endpoint } = fixture);
});

describe('firing, with a clock the test moves', () => {
  it('fires each slot once, the task carrying its schedule and slot, and every field of the template', async () => {
    const template = {
      url: `${endpoint.url}/report`,
      body: { kind: 'report' },
      queue: 'reports',
      headers: { 'x-token': 'secret' },
      concurrency_key: 'acme',
      rate_limit: { limit: 2, period_ms: 1_000 },
      priority: 3,
      max_attempts: 2,
      backoff: { initial_ms: 500 },
      timeout_ms: 1_000,
      lease_ms: 5_000,
      ttl_ms: 60_000,
    };
    const created = await call('POST', '/v1/schedules', schedule({ overlap: 'allow', task: template }));
    const due = new Date(created.json.next_fire_at);
    expect(await fireDueSchedules(t.db, { now: new Date(due.getTime() - 1) })).toMatchObject({ fired: 0 });
    expect(await fireDueSchedules(t.db, { now: due })).toMatchObject({ fired: 1 });
    expect(await fireDueSchedules(t.db, { now: due })).toMatchObject({ fired: 0, lost: 0 });
    const [task] = await fired('report');
    expect(iso(task!.slot)).toBe(due.toISOString());
    expect(iso(task!.run_at)).toBe(due.toISOString());
    const view = await call('GET', `/v1/tasks/${task!.id}`);
    expect(view.json).toMatchObject({
      schedule: { name: 'report', slot: due.toISOString() },
      url: `${endpoint.url}/report`,
      body: { kind: 'report' },
      queue: 'reports',
      header_names: ['x-token'],
      concurrency_key: 'acme',
      rate_limit: { limit: 2, period_ms: 1_000 },
      priority: 3,
      max_attempts: 2,
      timeout_ms: 1_000,
      lease_ms: 5_000,
      expires_at: new Date(due.getTime() + 60_000).toISOString(),
    });
    const [stored] = await t.db.query<{ headers: object; backoff: { initial_ms: number } }>(
      'select headers, backoff_initial_ms from sluice.all_tasks',
    );
    expect(stored).toMatchObject({ headers: { 'x-token': 'secret' }, backoff_initial_ms: 500 });
    expect((await call('GET', '/v1/schedules/report')).json).toMatchObject({
      last_slot_at: due.toISOString(),
      last_outcome: 'fired',
      last_task_id: task!.id,
      fired: 1,
      next_fire_at: new Date(due.getTime() + 5 * 60_000).toISOString(),
    });
  });

  it('after downtime fires only the latest missed slot, once, and counts the rest as missed', async () => {
    const created = await call('POST', '/v1/schedules', schedule({ overlap: 'allow' }));
    const due = Date.parse(created.json.next_fire_at);
    // Nothing dispatched for an hour and two and a half minutes after the first slot.
    const back = new Date(due + 62.5 * 60_000);
    expect(await fireDueSchedules(t.db, { now: back })).toMatchObject({ fired: 1 });
    expect(await fireDueSchedules(t.db, { now: back })).toMatchObject({ fired: 0 });
    const tasks = await fired('report');
    expect(tasks.map((x) => iso(x.slot))).toEqual([new Date(due + 60 * 60_000).toISOString()]);
    expect((await call('GET', '/v1/schedules/report')).json).toMatchObject({
      missed: 12,
      fired: 1,
      next_fire_at: new Date(due + 65 * 60_000).toISOString(),
    });
    // ttl_ms counts from the slot: a late firing past it expires instead of running.
    await call(
      'POST',
      '/v1/schedules',
      schedule({ name: 'fresh-only', overlap: 'allow', task: { url: `${endpoint.url}/f`, ttl_ms: 60_000 } }),
    );
    await fireDueSchedules(t.db, { now: back });
    const [late] = await t.db.query<{ expires_at: Date; run_at: Date }>(
      `select expires_at, run_at from sluice.all_tasks where schedule = 'fresh-only'`,
    );
    expect(late!.expires_at.getTime() - late!.run_at.getTime()).toBe(60_000);
    expect(late!.expires_at.getTime()).toBeLessThan(back.getTime());
  });

  it('passes over a slot whose task exists already (the name deleted and made again): not counted as fired', async () => {
    const clock = new Date('2026-06-01T00:01:00Z');
    const due = (await insertSchedule({ name: 'again', cron: '*/5 * * * *' }, clock)).nextFireAt!;
    expect(await fireDueSchedules(t.db, { now: due })).toMatchObject({ fired: 1 });
    const before = await fired('again');
    expect((await call('DELETE', '/v1/schedules/again')).status).toBe(204);
    await insertSchedule({ name: 'again', cron: '*/5 * * * *' }, clock);
    expect(await fireDueSchedules(t.db, { now: due })).toMatchObject({ fired: 0, lost: 1 });
    expect(await fired('again')).toEqual(before);
    expect(await scheduleGet(t.db, 'again')).toMatchObject({
      fired: 0,
      lastTaskId: null,
      lastSlotAt: null,
      lastOutcome: null,
      nextFireAt: new Date(due.getTime() + 5 * 60_000),
    });
  });

  it('follows wall time across DST: a repeated 02:30 fires once, an hourly :30 twice, a skipped 02:30 at 03:00', async () => {
    /** The slots a dispatcher that is always on time fires: the clock moves to each next slot in turn. */
    async function onTime(s: { name: string; cron: string }, from: string, n: number): Promise<string[]> {
      await insertSchedule({ ...s, timezone: 'Europe/Berlin' }, new Date(from));
      for (let i = 0; i < n; i++) {
        const [next] = await t.db.query<{ at: Date }>('select next_fire_at as at from sluice.schedules where name = $1', [s.name]);
        await fireDueSchedules(t.db, { now: next!.at });
      }
      await t.db.query('delete from sluice.schedules where name = $1', [s.name]);
      return (await fired(s.name)).map((x) => iso(x.slot));
    }
    // 2025-10-26 03:00 CEST → 02:00 CET: 02:30 comes twice.
    expect(await onTime({ name: 'fixed', cron: '30 2 * * *' }, '2025-10-25T12:00:00Z', 2)).toEqual([
      '2025-10-26T00:30:00.000Z', // 02:30 CEST, and not 02:30 CET an hour later
      '2025-10-27T01:30:00.000Z',
    ]);
    expect(await onTime({ name: 'hourly', cron: '30 * * * *' }, '2025-10-25T23:45:00Z', 3)).toEqual([
      '2025-10-26T00:30:00.000Z', // 02:30 CEST
      '2025-10-26T01:30:00.000Z', // 02:30 CET
      '2025-10-26T02:30:00.000Z',
    ]);
    // 2026-03-29 02:00 CET → 03:00 CEST: 02:30 never comes.
    expect(await onTime({ name: 'spring', cron: '30 2 * * *' }, '2026-03-28T12:00:00Z', 2)).toEqual([
      '2026-03-29T01:00:00.000Z', // 03:00 CEST, the first minute after the jump
      '2026-03-30T00:30:00.000Z',
    ]);
  });

  it('pause stops firing, resume starts again from the next slot, delete stops it for good', async () => {
    const created = await call('POST', '/v1/schedules', schedule({ overlap: 'allow' }));
    const due = Date.parse(created.json.next_fire_at);
    await call('POST', '/v1/schedules/report/pause');
    const later = new Date(due + 3_600_000);
    expect(await fireDueSchedules(t.db, { now: later })).toMatchObject({ fired: 0 });
    const resumed = await call('POST', '/v1/schedules/report/resume');
    // From the next slot after now: the hour that passed while paused never fires.
    expect(Date.parse(resumed.json.next_fire_at)).toBe(due);
    expect(await fireDueSchedules(t.db, { now: later })).toMatchObject({ fired: 1 });
    expect((await call('GET', '/v1/schedules/report')).json).toMatchObject({ missed: 12 });
    await call('DELETE', '/v1/schedules/report');
    expect(await fireDueSchedules(t.db, { now: new Date(due + 7_200_000) })).toMatchObject({ fired: 0 });
    // What it fired is left alone.
    expect(await fired('report')).toHaveLength(1);
  });

  it('wakes the dispatcher for the next slot: the next-due probe includes it, a paused schedule not', async () => {
    const clock = new Date(Date.now() + 5_000);
    const s = await insertSchedule({ name: 'soon', cron: '* * * * * *' }, new Date(clock.getTime() - 1_000));
    expect(s.nextFireAt!.getTime()).toBeLessThanOrEqual(clock.getTime());
    const due = await nextDueInMs(t.db);
    expect(due).toBeGreaterThan(2_000);
    expect(due).toBeLessThanOrEqual(5_000);
    await call('POST', '/v1/schedules/soon/pause');
    expect(await nextDueInMs(t.db)).toBeNull();
  });
});

describe('overlap policies, when the previous firing is unfinished', () => {
  async function twoSlots(overlap: 'skip' | 'queue' | 'allow') {
    const s = await insertSchedule({ name: overlap, cron: '*/5 * * * *', overlap }, new Date());
    const first = s.nextFireAt!;
    const second = new Date(first.getTime() + 5 * 60_000);
    await fireDueSchedules(t.db, { now: first });
    await fireDueSchedules(t.db, { now: second });
    return { first, second, third: new Date(second.getTime() + 5 * 60_000) };
  }

  it('skip: passes over the slot while the previous task is unfinished, fires again once it ended', async () => {
    const { third } = await twoSlots('skip');
    const [only, ...none] = await fired('skip');
    expect(none).toEqual([]);
    expect(await scheduleGet(t.db, 'skip')).toMatchObject({ fired: 1, skipped: 1, lastOutcome: 'skipped', lastTaskId: only!.id });
    await finish(only!.id);
    await fireDueSchedules(t.db, { now: third });
    expect((await fired('skip')).map((x) => iso(x.slot))).toEqual([iso(only!.slot), third.toISOString()]);
  });

  it('allow: enqueues every slot, and they may run side by side', async () => {
    const { second } = await twoSlots('allow');
    expect(await fired('allow')).toHaveLength(2);
    const claimed = await taskClaimBatch(t.db, { max: 10, clusterCap: null, queuesJson: '{}', now: second });
    expect(claimed).toHaveLength(2);
  });

  it('queue: the API gives the template a key of the schedule, limit 1', async () => {
    const created = await call('POST', '/v1/schedules', schedule({ name: 'serial', overlap: 'queue' }));
    expect(created.json.task).toMatchObject({ concurrency_key: 'schedule:serial', concurrency_limit: 1 });
  });

  it('queue: one at a time though a caller gave the key a larger limit first (an override of 1 wins)', async () => {
    // Enqueued onto the schedule's key before the schedule exists: the first task's limit sticks.
    const seeded = await call('POST', '/v1/tasks', {
      url: `${endpoint.url}/x`,
      concurrency_key: 'schedule:nightly',
      concurrency_limit: 10,
    });
    expect(seeded.status).toBe(201);
    const created = await call('POST', '/v1/schedules', schedule({ name: 'nightly', overlap: 'queue' }));
    const first = new Date(created.json.next_fire_at);
    const slot = (n: number) => new Date(first.getTime() + n * 5 * 60_000);
    const override = async () =>
      (await t.db.query<{ limit: number }>(`select "limit" from sluice.key_limits where concurrency_key = 'schedule:nightly'`))[0]?.limit;
    await fireDueSchedules(t.db, { now: slot(0) });
    await fireDueSchedules(t.db, { now: slot(1) });
    const claimed = await taskClaimBatch(t.db, { max: 10, clusterCap: null, queuesJson: '{}', now: new Date(slot(1).getTime() + 1_000) });
    expect(claimed).toHaveLength(1);
    expect(await override()).toBe(1);
    // An admin who removes the override gets it back at the next firing; one who sets another keeps it.
    await keyLimitDelete(t.db, 'default', 'schedule:nightly');
    await fireDueSchedules(t.db, { now: slot(2) });
    expect(await override()).toBe(1);
    await keyLimitPut(t.db, 'default', 'schedule:nightly', 2);
    await fireDueSchedules(t.db, { now: slot(3) });
    expect(await override()).toBe(2);
  });

  it('queue: enqueues every slot, run one at a time in slot order (a key of their own, limit 1)', async () => {
    const { second } = await twoSlots('queue');
    const tasks = await fired('queue');
    expect(tasks).toHaveLength(2);
    const claim = () => taskClaimBatch(t.db, { max: 10, clusterCap: null, queuesJson: '{}', now: new Date(second.getTime() + 1_000) });
    const [first, ...rest] = await claim();
    expect(rest).toEqual([]);
    expect(first).toMatchObject({ id: tasks[0]!.id, concurrencyKey: 'schedule:queue', concurrencyLimit: 1 });
    expect(await claim()).toEqual([]);
    await finish(first!.id);
    expect((await claim()).map((x) => x.id)).toEqual([tasks[1]!.id]);
  });
});

describe('racing dispatchers', () => {
  it('fire each slot exactly once, with the clock moved slot by slot', async () => {
    const names = ['a', 'b', 'c', 'd', 'e'];
    const start = new Date('2026-06-01T00:00:00Z');
    for (const name of names) await insertSchedule({ name, cron: '* * * * *' }, start);
    const [one, two] = [openPgDb(t.url, 4), openPgDb(t.url, 4)];
    const totals = { fired: 0, lost: 0 };
    try {
      for (let minute = 1; minute <= 30; minute++) {
        const now = new Date(start.getTime() + minute * 60_000);
        const reports = await Promise.all([
          fireDueSchedules(one, { now }),
          fireDueSchedules(two, { now }),
          fireDueSchedules(t.db, { now }),
        ]);
        for (const r of reports) {
          totals.fired += r.fired;
          totals.lost += r.lost;
        }
      }
    } finally {
      await Promise.all([one.close(), two.close()]);
    }
    const counts = await t.db.query<{ n: number; slots: number }>(
      'select count(*)::int as n, count(distinct (schedule, schedule_slot))::int as slots from sluice.all_tasks',
    );
    expect(counts).toEqual([{ n: 150, slots: 150 }]);
    expect(totals.fired).toBe(150);
    console.info(`schedules race: 5 schedules × 30 slots, 3 dispatchers: 150 fired, ${totals.lost} lost races`);
  });

  it('two Node dispatch loops on the database clock push each slot once', async () => {
    const { config } = await testConfig(t.url);
    const keyring = await loadKeyring(config.signingKeys);
    const pools = [openPgDb(t.url, 6), openPgDb(t.url, 6)];
    const loops = pools.map(
      (db) =>
        new DispatchLoop((signal, nudges) => dispatchRun({ db, config, keyring }, { budgetMs: 5_000, signal, nudges }), {
          maxSleepMs: NO_POLL,
        }),
    );
    const first = (await insertSchedule({ name: 'tick', cron: '* * * * * *' }, new Date())).nextFireAt!.getTime();
    try {
      for (const loop of loops) loop.start();
      await endpoint.waitFor(4);
    } finally {
      await Promise.all(loops.map((l) => l.stop()));
      await Promise.all(pools.map((p) => p.close()));
    }
    const tasks = await fired('tick');
    const pushedIds = endpoint.received.map((p) => String(p.headers['sluice-task-id']));
    expect(new Set(pushedIds).size).toBe(pushedIds.length);
    expect(new Set(tasks.map((x) => iso(x.slot))).size).toBe(tasks.length);
    // Every slot from the first to the last fired was fired once or, had both loops woken late,
    // passed over by the catch-up rule: none fired twice, none lost.
    const s = await scheduleGet(t.db, 'tick');
    expect(s!.fired).toBe(tasks.length);
    expect(s!.fired + s!.missed).toBe((Date.parse(tasks.at(-1)!.slot) - first) / 1_000 + 1);
  });
});
