/**
 * Schedules on a real Postgres and over real HTTP (docs/guide.md "Schedules"): the API and its
 * 400s, and the Node server waking for a firing with no poll to help. Firing with a clock the
 * test moves and dispatchers racing are in schedule-firing.test.ts.
 */
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { startNodeSluice } from '../../src/node/server.ts';
import { type TestSecrets, testEnv } from '../helpers/config.ts';
import type { TestDatabase } from '../helpers/db.ts';
import type { TestEndpoint } from '../helpers/endpoint.ts';
import { NO_POLL, useSchedules } from '../helpers/schedules.ts';

const { fixture, call, schedule } = useSchedules();
let t: TestDatabase;
let endpoint: TestEndpoint;
let secrets: TestSecrets;
let writeOnly: string;
beforeAll(() => {
  ({ t, endpoint, secrets, writeOnly } = fixture);
});

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
      // Every firing in one trace, forever: refused.
      [schedule({ task: { url: `${endpoint.url}/q`, traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01` } }), ['task.traceparent']],
      // As a header of the task too, whatever its case.
      [
        schedule({ task: { url: `${endpoint.url}/q`, headers: { TraceParent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01` } } }),
        ['task.headers.TraceParent'],
      ],
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
