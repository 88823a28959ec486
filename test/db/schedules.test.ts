/**
 * Schedules on a real Postgres and over real HTTP (docs/guide.md "Schedules"): the API and its 400s,
 * firing with a clock the test moves (catch-up after downtime, DST, overlap policies,
 * pause/resume/delete), exactly one task per slot with dispatchers racing, and the Node server
 * waking for a firing with no poll to help.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { nextSlot, parseCron } from '../../src/core/schedule.ts';
import { taskClaimBatch } from '../../src/db/claim.ts';
import { nextDueInMs } from '../../src/db/due.ts';
import { keyLimitDelete, keyLimitPut } from '../../src/db/queues.ts';
import { type NewSchedule, scheduleGet, scheduleInsert, toTemplate } from '../../src/db/schedules.ts';
import { fireDueSchedules } from '../../src/dispatcher/fire-schedules.ts';
import { DispatchLoop } from '../../src/dispatcher/loop.ts';
import { dispatchRun } from '../../src/dispatcher/run.ts';
import { openPgDb } from '../../src/node/pg-db.ts';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { generateApiKey } from '../../src/security/api-keys.ts';
import { loadKeyring } from '../../src/security/keyring.ts';
import { makeSecrets, type TestSecrets, testConfig, testEnv } from '../helpers/config.ts';
import { createTestDatabase, emptyTables, type TestDatabase } from '../helpers/db.ts';
import { startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';
import { newTask } from '../helpers/tasks.ts';

const NO_POLL = 3_600_000;

let t: TestDatabase;
let endpoint: TestEndpoint;
let secrets: TestSecrets;
let writeOnly: string;
/** Serves the API only: nothing fires unless a test fires it, with the clock it chooses. */
let api: NodeSluice;

beforeAll(async () => {
  let writer: Awaited<ReturnType<typeof generateApiKey>>;
  [t, endpoint, secrets, writer] = await Promise.all([
    createTestDatabase(),
    startEndpoint(),
    makeSecrets(),
    generateApiKey('w', ['tasks:write']),
  ]);
  writeOnly = writer.key;
  const env = testEnv(secrets, t.url, { SLUICE_API_KEYS: JSON.stringify([...JSON.parse(secrets.apiKeysJson), writer.entry]) });
  api = await startNodeSluice({ env, dispatch: false });
});
afterAll(async () => {
  await api?.close();
  await endpoint?.close();
  await t?.drop();
});
beforeEach(async () => {
  await emptyTables(t.db, 'sluice.tasks, sluice.lanes, sluice.key_limits, sluice.schedules');
  endpoint.received.length = 0;
  endpoint.reply(() => ({ status: 200 }));
});

async function call(method: string, path: string, body?: unknown, key = secrets.apiKey, base = api.url) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}
const schedule = (extra: Record<string, unknown> = {}) => ({
  name: 'report',
  cron: '*/5 * * * *',
  task: { url: `${endpoint.url}/report`, body: { kind: 'report' } },
  ...extra,
});

/** A schedule written straight to the database, its first slot the first after `clock`. */
async function insertSchedule(s: { name: string; cron: string; timezone?: string; overlap?: NewSchedule['overlap'] }, clock: Date) {
  const timezone = s.timezone ?? 'UTC';
  const parsed = parseCron(s.cron, timezone);
  if (!('cron' in parsed)) throw new Error(parsed.problem);
  const overlap = s.overlap ?? 'allow';
  const task = newTask({ url: `${endpoint.url}/${s.name}` });
  return scheduleInsert(t.db, {
    name: s.name,
    cron: s.cron,
    timezone,
    overlap,
    template: toTemplate(overlap === 'queue' ? { ...task, concurrencyKey: `schedule:${s.name}`, concurrencyLimit: 1 } : task),
    nextFireAt: nextSlot(parsed.cron, clock),
  });
}
const fired = (name: string) =>
  t.db.query<{ id: string; slot: string; run_at: string; status: string }>(
    `select id::text, schedule_slot as slot, run_at, status from sluice.all_tasks where schedule = $1 order by schedule_slot`,
    [name],
  );
const iso = (d: unknown) => new Date(d as string).toISOString();
/** Ends a task as if its push succeeded. */
const finish = (id: string) =>
  t.db.query(
    `update sluice.tasks set status = 'succeeded', finished_at = now(), lease_id = null, leased_at = null, lease_expires_at = null
     where id = $1`,
    [id],
  );

describe('the API', () => {
  it('creates, reads, lists, pauses, resumes and deletes a schedule', async () => {
    const created = await call(
      'POST',
      '/v1/schedules',
      schedule({ timezone: 'europe/berlin', task: { url: `${endpoint.url}/r`, headers: { 'x-token': 'secret' } } }),
    );
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({
      name: 'report',
      cron: '*/5 * * * *',
      timezone: 'Europe/Berlin',
      overlap: 'skip',
      paused: false,
      last_slot_at: null,
      fired: 0,
      task: { url: `${endpoint.url}/r`, queue: 'default', method: 'POST', max_attempts: 5, header_names: ['x-token'] },
    });
    // Header values may be credentials: never shown.
    expect(JSON.stringify(created.json)).not.toContain('secret');
    const next = Date.parse(created.json.next_fire_at);
    expect(next).toBeGreaterThan(Date.now());
    expect(next).toBeLessThanOrEqual(Date.now() + 5 * 60_000);
    expect(new Date(next).getUTCMinutes() % 5).toBe(0);

    expect((await call('POST', '/v1/schedules', schedule())).json).toMatchObject({ code: 'schedule_exists' });
    await call('POST', '/v1/schedules', schedule({ name: 'another', paused: true }));
    expect((await call('GET', '/v1/schedules/report')).json).toEqual(created.json);
    const page = await call('GET', '/v1/schedules?limit=1');
    expect(page.json.schedules.map((s: { name: string }) => s.name)).toEqual(['another']);
    const rest = await call('GET', `/v1/schedules?limit=1&cursor=${page.json.next_cursor}`);
    expect(rest.json.schedules.map((s: { name: string }) => s.name)).toEqual(['report']);

    const paused = await call('POST', '/v1/schedules/report/pause');
    expect(paused.json).toMatchObject({ paused: true, next_fire_at: null });
    const resumed = await call('POST', '/v1/schedules/report/resume');
    expect(resumed.json).toMatchObject({ paused: false, next_fire_at: expect.any(String) });
    // Resuming one that is not paused leaves its next slot alone.
    expect((await call('POST', '/v1/schedules/report/resume')).json.next_fire_at).toBe(resumed.json.next_fire_at);
    // A key that may write but not read sees only the state.
    expect((await call('POST', '/v1/schedules/report/pause', undefined, writeOnly)).json).toEqual({
      name: 'report',
      paused: true,
      next_fire_at: null,
    });

    expect((await call('DELETE', '/v1/schedules/report')).status).toBe(204);
    for (const [method, path] of [
      ['GET', '/v1/schedules/report'],
      ['DELETE', '/v1/schedules/report'],
      ['POST', '/v1/schedules/report/pause'],
      ['POST', '/v1/schedules/report/resume'],
    ] as const) {
      expect(await call(method, path)).toMatchObject({ status: 404, json: { code: 'not_found' } });
    }
  });

  it("takes the first slot from the database's clock, not the API process's, on create and on resume", async () => {
    // The API process's clock an hour ahead of the database's (the server runs in this process).
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 3_600_000 });
    let created: Awaited<ReturnType<typeof call>>;
    let resumed: Awaited<ReturnType<typeof call>>;
    try {
      created = await call('POST', '/v1/schedules', schedule());
      await call('POST', '/v1/schedules/report/pause');
      resumed = await call('POST', '/v1/schedules/report/resume');
    } finally {
      vi.useRealTimers();
    }
    const [clock] = await t.db.query<{ now: Date }>('select clock_timestamp() as now');
    for (const next of [created.json.next_fire_at, resumed.json.next_fire_at]) {
      expect(Date.parse(next)).toBeGreaterThan(clock!.now.getTime() - 5 * 60_000);
      expect(Date.parse(next)).toBeLessThanOrEqual(clock!.now.getTime() + 5 * 60_000);
    }
  });

  it('takes tasks:write to create and tasks:read to read', async () => {
    expect((await call('POST', '/v1/schedules', schedule(), secrets.readKey)).status).toBe(403);
    expect((await call('POST', '/v1/schedules', schedule(), writeOnly)).status).toBe(201);
    expect((await call('GET', '/v1/schedules', undefined, writeOnly)).status).toBe(403);
    expect((await call('GET', '/v1/schedules/report', undefined, secrets.readKey)).status).toBe(200);
  });

  it('answers 400 naming every problem at once, and writes nothing', async () => {
    const bad = await call('POST', '/v1/schedules', {
      name: 'bad name',
      cron: '61 * * * *',
      timezone: 'Mars/Olympus_Mons',
      overlap: 'sometimes',
      task: { url: 'ftp://example.com/x', run_at: '2030-01-01T00:00:00Z', dedup_key: 'k', retries: 3, max_attempts: 0 },
      extra: true,
    });
    expect(bad.status).toBe(400);
    const paths = bad.json.issues.map((i: { path: string }) => i.path).sort();
    expect(paths).toEqual([
      'cron',
      'extra',
      'name',
      'overlap',
      'task.dedup_key',
      'task.max_attempts',
      'task.retries',
      'task.run_at',
      'task.url',
      'timezone',
    ]);
    const message = (path: string) => bad.json.issues.find((i: { path: string }) => i.path === path).message;
    expect(message('cron')).toMatch(/Invalid value for minute: 61/);
    expect(message('timezone')).toMatch(/not an IANA time zone/);
    expect(message('task.run_at')).toMatch(/runs at its slot/);
    expect(message('task.url')).toMatch(/https/);

    const cases: Array<[unknown, string[]]> = [
      [{ name: 'x' }, ['cron', 'task']],
      [schedule({ cron: '0 0 30 2 *' }), ['cron']],
      [schedule({ timezone: '+02:00' }), ['timezone']],
      [schedule({ task: 'not an object' }), ['task']],
      [schedule({ task: { body: 1 } }), ['task.url']],
      [
        schedule({ overlap: 'queue', task: { url: `${endpoint.url}/q`, concurrency_key: 'k', concurrency_limit: 2 } }),
        ['task.concurrency_key', 'task.concurrency_limit'],
      ],
      [
        schedule({ task: { url: `${endpoint.url}/q`, delay_ms: 5, expires_at: '2030-01-01T00:00:00Z', timeout_ms: 90_000 } }),
        ['task.delay_ms', 'task.expires_at', 'task.timeout_ms'],
      ],
      // A template's parent would be dropped at every firing: refused, not ignored.
      [schedule({ task: { url: `${endpoint.url}/q`, parent_id: '1' } }), ['task.parent_id']],
    ];
    for (const [body, expected] of cases) {
      const res = await call('POST', '/v1/schedules', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.issues.map((i: { path: string }) => i.path).sort(), JSON.stringify(res.json)).toEqual(expected);
    }
    expect((await call('GET', '/v1/schedules?limit=0')).status).toBe(400);
    expect((await t.db.query('select 1 from sluice.schedules')).length).toBe(0);
  });
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

describe('the Node server', () => {
  it('fires a schedule when it comes due, with no poll to wake it', async () => {
    const sluice = await startNodeSluice({ env: testEnv(secrets, t.url), maxSleepMs: NO_POLL });
    try {
      const created = await call('POST', '/v1/schedules', schedule({ cron: '* * * * * *', overlap: 'allow' }), secrets.apiKey, sluice.url);
      const pushes = await endpoint.waitFor(2);
      const slots: string[] = [];
      for (const push of pushes.slice(0, 2)) {
        const task = await call('GET', `/v1/tasks/${push.headers['sluice-task-id']}`, undefined, secrets.apiKey, sluice.url);
        expect(task.json.schedule.name).toBe('report');
        expect(push.receivedAt).toBeGreaterThanOrEqual(Date.parse(task.json.schedule.slot));
        slots.push(task.json.schedule.slot);
        console.info(`node: slot ${task.json.schedule.slot} pushed ${push.receivedAt - Date.parse(task.json.schedule.slot)} ms after it`);
      }
      expect(Date.parse(slots[0]!)).toBeGreaterThanOrEqual(Date.parse(created.json.next_fire_at));
      expect(Date.parse(slots[1]!)).toBeGreaterThan(Date.parse(slots[0]!));
      await call('DELETE', '/v1/schedules/report', undefined, secrets.apiKey, sluice.url);
    } finally {
      await sluice.close();
    }
  });
});
