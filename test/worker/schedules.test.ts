/**
 * Schedules on the real Worker in workerd (docs/guide.md "Schedules"): the scheduler Durable Object's
 * alarm is set for the next slot, so a schedule fires without waiting for the cron minute (the
 * cron is never fired here unless a test says so), and each slot is pushed once.
 */
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseCron } from '../../src/core/schedule.ts';
import { scheduleInsert, toTemplate } from '../../src/db/schedules.ts';
import type { RunningWorker } from '../../src/node/worker-runtime.ts';
import type { TestSecrets } from '../helpers/config.ts';
import type { TestDatabase } from '../helpers/db.ts';
import { emptyTables } from '../helpers/db.ts';
import type { TestEndpoint } from '../helpers/endpoint.ts';
import { newTask } from '../helpers/tasks.ts';
import { useWorkerFixture } from '../helpers/worker-fixture.ts';

const f = useWorkerFixture();
let t: TestDatabase;
let endpoint: TestEndpoint;
let secrets: TestSecrets;
let worker: RunningWorker;
beforeAll(() => {
  ({ t, endpoint, secrets, worker } = f);
});
beforeEach(async () => {
  await emptyTables(t.db, 'sluice.tasks, sluice.lanes, sluice.schedules');
  endpoint.received.length = 0;
  endpoint.reply(() => ({ status: 200 }));
});

async function call(method: string, path: string, body?: unknown) {
  const res = await fetch(`${worker.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${secrets.apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

/** The schedule and slot of each task pushed, by the tasks' own rows. */
async function pushedSlots(): Promise<Array<{ name: string; slot: string }>> {
  const ids = endpoint.received.map((p) => String(p.headers['sluice-task-id']));
  const rows = await t.db.query<{ schedule: string; slot: Date }>(
    'select schedule, schedule_slot as slot from sluice.all_tasks where id = any($1::bigint[]) order by schedule_slot',
    [ids],
  );
  return rows.map((r) => ({ name: r.schedule, slot: r.slot.toISOString() }));
}

describe('a schedule on the Worker', () => {
  it('fires at its slots without the cron: the API pokes the alarm, each idle shard sets it for the next slot', async () => {
    const created = await call('POST', '/v1/schedules', {
      name: 'every-second',
      cron: '* * * * * *',
      overlap: 'allow',
      task: { url: `${endpoint.url}/tick`, body: { from: 'schedule' } },
    });
    expect(created.status).toBe(201);
    const pushes = await endpoint.waitFor(2);
    await call('DELETE', '/v1/schedules/every-second');
    expect(JSON.parse(pushes[0]!.text)).toEqual({ from: 'schedule' });
    const slots = await pushedSlots();
    expect(slots[0]!.name).toBe('every-second');
    expect(Date.parse(slots[0]!.slot)).toBeGreaterThanOrEqual(Date.parse(created.json.next_fire_at));
    // Each slot pushed once.
    expect(new Set(slots.map((s) => s.slot)).size).toBe(slots.length);
    expect(new Set(endpoint.received.map((p) => p.headers['sluice-task-id'])).size).toBe(endpoint.received.length);
    for (const push of pushes.slice(0, 2)) {
      const task = await call('GET', `/v1/tasks/${push.headers['sluice-task-id']}`);
      expect(push.receivedAt).toBeGreaterThanOrEqual(Date.parse(task.json.schedule.slot));
      console.info(`worker: slot ${task.json.schedule.slot} pushed ${push.receivedAt - Date.parse(task.json.schedule.slot)} ms after it`);
    }
  });

  it('a schedule the scheduler never heard of fires at its slot after one cron poke', async () => {
    // Written straight to the database, its first slot 2 s ahead: exactly what a lost alarm
    // leaves behind. The cron's run reads the next due time, the slot, and sets the alarm.
    const parsed = parseCron('*/2 * * * * *', 'UTC');
    if (!('cron' in parsed)) throw new Error(parsed.problem);
    const slot = parsed.cron.nextRun(new Date(Date.now() + 1_000))!;
    await scheduleInsert(t.db, {
      name: 'unannounced',
      cron: '*/2 * * * * *',
      timezone: 'UTC',
      overlap: 'skip',
      template: toTemplate(newTask({ url: `${endpoint.url}/unannounced` })),
      nextFireAt: slot,
    });
    await worker.scheduled();
    const [push] = await endpoint.waitFor(1);
    await t.db.query(`update sluice.schedules set paused = true, next_fire_at = null`);
    expect(push!.receivedAt).toBeGreaterThanOrEqual(slot.getTime());
    expect((await pushedSlots())[0]).toEqual({ name: 'unannounced', slot: slot.toISOString() });
  });
});
