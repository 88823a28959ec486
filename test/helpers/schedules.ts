/**
 * Schedules' test fixture, for test/db/schedules*.test.ts: a test database emptied before each
 * test, an endpoint answering 200, and a Node server that serves the API only (nothing fires
 * unless a test fires it, with the clock it chooses).
 */
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { nextSlot, parseCron } from '../../src/core/schedule.ts';
import { type NewSchedule, scheduleInsert, toTemplate } from '../../src/db/schedules.ts';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { generateApiKey } from '../../src/security/api-keys.ts';
import { makeSecrets, type TestSecrets, testEnv } from './config.ts';
import { createTestDatabase, emptyTables, type TestDatabase } from './db.ts';
import { startEndpoint, type TestEndpoint } from './endpoint.ts';
import { newTask } from './tasks.ts';

/** A sleep bound no test reaches: the server wakes only when it is told to. */
export const NO_POLL = 3_600_000;

export const iso = (d: unknown) => new Date(d as string).toISOString();

export interface SchedulesFixture {
  t: TestDatabase;
  endpoint: TestEndpoint;
  secrets: TestSecrets;
  /** A key with tasks:write only. */
  writeOnly: string;
  /** Serves the API only: nothing fires unless a test fires it. */
  api: NodeSluice;
}

export function useSchedules() {
  const f = {} as SchedulesFixture;
  beforeAll(async () => {
    const [t, endpoint, secrets, writer] = await Promise.all([
      createTestDatabase(),
      startEndpoint(),
      makeSecrets(),
      generateApiKey('w', ['tasks:write']),
    ]);
    Object.assign(f, { t, endpoint, secrets, writeOnly: writer.key });
    const env = testEnv(secrets, t.url, { SLUICE_API_KEYS: JSON.stringify([...JSON.parse(secrets.apiKeysJson), writer.entry]) });
    f.api = await startNodeSluice({ env, dispatch: false });
  });
  afterAll(async () => {
    await f.api?.close();
    await f.endpoint?.close();
    await f.t?.drop();
  });
  beforeEach(async () => {
    await emptyTables(f.t.db, 'sluice.tasks, sluice.lanes, sluice.key_limits, sluice.schedules');
    f.endpoint.received.length = 0;
    f.endpoint.reply(() => ({ status: 200 }));
  });

  async function call(method: string, path: string, body?: unknown, key = f.secrets.apiKey, base = f.api.url) {
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
    task: { url: `${f.endpoint.url}/report`, body: { kind: 'report' } },
    ...extra,
  });

  /** A schedule written straight to the database, its first slot the first after `clock`. */
  async function insertSchedule(s: { name: string; cron: string; timezone?: string; overlap?: NewSchedule['overlap'] }, clock: Date) {
    const timezone = s.timezone ?? 'UTC';
    const parsed = parseCron(s.cron, timezone);
    if (!('cron' in parsed)) throw new Error(parsed.problem);
    const overlap = s.overlap ?? 'allow';
    const task = newTask({ url: `${f.endpoint.url}/${s.name}` });
    return scheduleInsert(f.t.db, {
      name: s.name,
      cron: s.cron,
      timezone,
      overlap,
      template: toTemplate(overlap === 'queue' ? { ...task, concurrencyKey: `schedule:${s.name}`, concurrencyLimit: 1 } : task),
      nextFireAt: nextSlot(parsed.cron, clock),
    });
  }
  const fired = (name: string) =>
    f.t.db.query<{ id: string; slot: string; run_at: string; status: string }>(
      `select id::text, schedule_slot as slot, run_at, status from sluice.all_tasks where schedule = $1 order by schedule_slot`,
      [name],
    );
  /** Ends a task as if its push succeeded. */
  const finish = (id: string) =>
    f.t.db.query(
      `update sluice.tasks set status = 'succeeded', finished_at = now(), lease_id = null, leased_at = null, lease_expires_at = null
       where id = $1`,
      [id],
    );
  return { fixture: f, call, schedule, insertSchedule, fired, finish };
}
