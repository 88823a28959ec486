/**
 * Rate limits in the claim (migrations/0011_rate_limits.sql): per queue and per key, beside the
 * concurrency limits, as a sliding window of grants. Claim passes with a clock the test moves;
 * then 8 dispatchers racing over real HTTP, checked on every claim's time.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.ts';
import { taskClaimBatch } from '../../src/db/claim.ts';
import { nextDueInMs } from '../../src/db/due.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { dispatchRun } from '../../src/dispatcher/run.ts';
import { openPgDb } from '../../src/node/pg-db.ts';
import { startNodeSluice } from '../../src/node/server.ts';
import { generateApiKey } from '../../src/security/api-keys.ts';
import { loadKeyring } from '../../src/security/keyring.ts';
import { makeSecrets, type TestSecrets, testConfig, testEnv } from '../helpers/config.ts';
import { createTestDatabase, emptyTables, type TestDatabase } from '../helpers/db.ts';
import { startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';
import { newTask } from '../helpers/tasks.ts';

const QUEUES = {
  api: { rate: { limit: 3, period_ms: 1_000 } },
  tenants: { key_rate: { limit: 2, period_ms: 1_000 }, key_concurrency: 5 },
  both: { rate: { limit: 4, period_ms: 1_000 }, concurrency: 2 },
};

let t: TestDatabase;
let config: Config;
let endpoint: TestEndpoint;
let secrets: TestSecrets;

beforeAll(async () => {
  [t, endpoint, secrets] = await Promise.all([createTestDatabase(), startEndpoint(), makeSecrets()]);
  ({ config } = await testConfig(t.url, { SLUICE_QUEUES: JSON.stringify(QUEUES) }));
});
afterAll(async () => {
  await endpoint?.close();
  await t?.drop();
});
beforeEach(async () => {
  await emptyTables(t.db, 'sluice.tasks, sluice.lanes, sluice.queues, sluice.key_limits, sluice.rate_grants, sluice.counters');
  // Passes at moved clocks moved the promotion window on: back to the database's clock.
  await t.db.query('update sluice.promotion set promoted_to = now()');
});

const T0 = Date.parse('2030-01-01T00:00:00Z');
/** Tasks due long before T0, so that every pass at T0 or later finds them due. */
const due = new Date(T0 - 3_600_000);

async function claimAt(ms: number, max = 100) {
  return taskClaimBatch(t.db, { max, clusterCap: null, queuesJson: config.claimQueuesJson, now: new Date(T0 + ms) });
}

describe('rate limits in the claim', () => {
  it('lease at most `limit` tasks of a queue per period, a sliding window', async () => {
    await taskInsertMany(
      t.db,
      Array.from({ length: 10 }, () => newTask({ queue: 'api', runAt: due })),
    );
    expect(await claimAt(0)).toHaveLength(3);
    expect(await claimAt(500)).toHaveLength(0);
    expect(await claimAt(999)).toHaveLength(0);
    // The first grants end at T0 + 1 s: room for three more, not before.
    expect(await claimAt(1_000)).toHaveLength(3);
    expect(await claimAt(1_999)).toHaveLength(0);
    expect(await claimAt(2_000)).toHaveLength(3);
    // Held tasks used no attempt.
    const [held] = await t.db.query<{ n: number; attempts: number }>(
      `select count(*)::int as n, max(attempts)::int as attempts from sluice.all_tasks where status = 'pending'`,
    );
    expect(held).toEqual({ n: 1, attempts: 0 });
  });

  it('count a window that slides: grants made at different times end at different times', async () => {
    await taskInsertMany(
      t.db,
      Array.from({ length: 10 }, () => newTask({ queue: 'api', runAt: due })),
    );
    expect(await claimAt(0, 1)).toHaveLength(1);
    expect(await claimAt(400, 2)).toHaveLength(2);
    expect(await claimAt(900)).toHaveLength(0);
    // At 1 s only the first grant has ended; at 1.4 s the other two.
    expect(await claimAt(1_000)).toHaveLength(1);
    expect(await claimAt(1_399)).toHaveLength(0);
    expect(await claimAt(1_400)).toHaveLength(2);
  });

  it('limit each key by the queue key_rate, and a task rate_limit sets its key rate if none is set', async () => {
    await taskInsertMany(t.db, [
      ...Array.from({ length: 5 }, () => newTask({ queue: 'tenants', concurrencyKey: 'acme', runAt: due })),
      ...Array.from({ length: 5 }, () => newTask({ queue: 'tenants', concurrencyKey: 'globex', runAt: due })),
      // The first task of "initech" gives its key 4 per second; the second's 1 per second is ignored.
      newTask({ queue: 'tenants', concurrencyKey: 'initech', runAt: due, rateLimit: { limit: 4, period_ms: 1_000 } }),
      ...Array.from({ length: 5 }, () =>
        newTask({ queue: 'tenants', concurrencyKey: 'initech', runAt: due, rateLimit: { limit: 1, period_ms: 1_000 } }),
      ),
    ]);
    const byKey = (tasks: Awaited<ReturnType<typeof claimAt>>) =>
      Object.fromEntries(['acme', 'globex', 'initech'].map((k) => [k, tasks.filter((x) => x.concurrencyKey === k).length]));
    const first = await claimAt(0);
    expect(byKey(first)).toEqual({ acme: 2, globex: 2, initech: 4 });
    expect(byKey(await claimAt(500))).toEqual({ acme: 0, globex: 0, initech: 0 });
    // Each claim here lasts long: concurrency (5 per key) is not what holds them.
    expect(byKey(await claimAt(1_000))).toEqual({ acme: 2, globex: 2, initech: 1 });
  });

  it('hold both limits at once: a queue at its concurrency limit takes no rate, and the rate holds when slots free', async () => {
    await taskInsertMany(
      t.db,
      Array.from({ length: 8 }, () => newTask({ queue: 'both', runAt: due })),
    );
    const first = await claimAt(0);
    expect(first).toHaveLength(2); // concurrency 2
    // The two end: the rate (4 per second) has 2 left in this window.
    await t.db.query(
      `update sluice.tasks set status = 'succeeded', finished_at = now(), lease_id = null, leased_at = null, lease_expires_at = null where status = 'leased'`,
    );
    expect(await claimAt(100)).toHaveLength(2);
    await t.db.query(
      `update sluice.tasks set status = 'succeeded', finished_at = now(), lease_id = null, leased_at = null, lease_expires_at = null where status = 'leased'`,
    );
    expect(await claimAt(200)).toHaveLength(0);
    const [held] = await t.db.query<{ value: number }>(
      `select value from sluice.counters where metric = 'held_back' and queue = 'both' and label = 'rate'`,
    );
    expect(held?.value).toBe(1);
    expect(await claimAt(1_000)).toHaveLength(2);
  });

  it('follow a run-time override of the queue rate', async () => {
    await taskInsertMany(
      t.db,
      Array.from({ length: 10 }, () => newTask({ queue: 'api', runAt: due })),
    );
    await t.db.query(`insert into sluice.queues (name, options) values ('api', '{"rate": {"limit": 5, "period_ms": 1000}}')`);
    expect(await claimAt(0)).toHaveLength(5);
  });

  it('wake the dispatcher when a held level has room again, on the database clock', async () => {
    await taskInsertMany(
      t.db,
      Array.from({ length: 5 }, () => newTask({ queue: 'tenants', concurrencyKey: 'acme' })),
    );
    const claimed = await taskClaimBatch(t.db, { max: 100, clusterCap: null, queuesJson: config.claimQueuesJson });
    expect(claimed).toHaveLength(2);
    // Leases are not what it waits for: they end now.
    await t.db.query(
      `update sluice.tasks set status = 'succeeded', finished_at = now(), lease_id = null, leased_at = null, lease_expires_at = null where status = 'leased'`,
    );
    const ms = await nextDueInMs(t.db);
    expect(ms).not.toBeNull();
    expect(ms!).toBeGreaterThan(0);
    expect(ms!).toBeLessThanOrEqual(1_000);
  });
});

describe('rate limits under racing dispatchers', () => {
  it('never let more than `limit` claims into any window of the period, and deliver every task once', async () => {
    const RATE = { limit: 5, period_ms: 400 };
    const race = (
      await testConfig(t.url, {
        SLUICE_QUEUES: JSON.stringify({ paced: { rate: RATE }, keyed: { key_rate: RATE } }),
        SLUICE_DISPATCH_PARALLELISM: '4',
      })
    ).config;
    const N = 30;
    await taskInsertMany(t.db, [
      ...Array.from({ length: N }, (_, i) => newTask({ queue: 'paced', url: `${endpoint.url}/p`, body: JSON.stringify({ i }) })),
      ...Array.from({ length: N }, (_, i) =>
        newTask({ queue: 'keyed', concurrencyKey: `k${i % 2}`, url: `${endpoint.url}/k`, body: JSON.stringify({ i }) }),
      ),
    ]);
    endpoint.received.length = 0;
    endpoint.reply(() => ({ status: 200 }));
    const keyring = await loadKeyring(race.signingKeys);
    const dispatcher = async () => {
      const db = openPgDb(t.url, 2);
      try {
        for (;;) {
          const report = await dispatchRun({ db, config: race, keyring }, { budgetMs: 5_000 });
          const [left] = await db.query<{ n: number }>(
            `select count(*)::int as n from sluice.all_tasks where status in ('pending', 'leased')`,
          );
          if (left!.n === 0) return;
          // As the Node loop does: sleep until the next grant ends (or briefly, if another dispatcher holds the work).
          await new Promise((r) => setTimeout(r, Math.min(report.nextDueInMs ?? 20, 200)));
        }
      } finally {
        await db.close();
      }
    };
    await Promise.all(Array.from({ length: 8 }, dispatcher));

    // Every task once, and succeeded.
    const ids = endpoint.received.map((p) => String(p.headers['sluice-task-id']));
    expect(new Set(ids).size).toBe(2 * N);
    expect(ids).toHaveLength(2 * N);
    // Each claim's time is its attempt's start: per level, no window of the period holds more than the limit.
    const rows = await t.db.query<{ level: string; started: Date }>(
      `select t.queue || coalesce('/' || t.concurrency_key, '') as level, a.started_at as started
       from sluice.all_attempts a join sluice.all_tasks t on t.id = a.task_id order by a.started_at`,
    );
    const byLevel = new Map<string, number[]>();
    for (const r of rows) byLevel.set(r.level, [...(byLevel.get(r.level) ?? []), new Date(r.started).getTime()]);
    expect([...byLevel.keys()].sort()).toEqual(['keyed/k0', 'keyed/k1', 'paced']);
    for (const [level, times] of byLevel) {
      let most = 0;
      for (let i = 0; i < times.length; i++) {
        const inWindow = times.filter((x) => x >= times[i]! && x < times[i]! + RATE.period_ms).length;
        most = Math.max(most, inWindow);
      }
      expect(most, `${level}: claims in one window of ${RATE.period_ms} ms`).toBeLessThanOrEqual(RATE.limit);
      const spanMs = times.at(-1)! - times[0]!;
      console.info(`rate race: ${level} ${times.length} claims over ${spanMs} ms, at most ${most} in any ${RATE.period_ms} ms`);
    }
    // What the endpoint saw, for the record (arrival times include delivery jitter; see docs/guide.md "Rate limits").
    const arrivals = endpoint.received.filter((p) => p.path === '/p').map((p) => p.receivedAt);
    const seen = Math.max(...arrivals.map((a) => arrivals.filter((x) => x >= a && x < a + RATE.period_ms).length));
    console.info(`rate race: the endpoint saw at most ${seen} pushes of "paced" in any ${RATE.period_ms} ms`);
  });
});

describe('rate limits on the Node server', () => {
  it('push held tasks when the rate has room again, woken by the due time alone (no poll)', async () => {
    const env = testEnv(secrets, t.url, { SLUICE_QUEUES: JSON.stringify({ paced: { rate: { limit: 2, period_ms: 500 } } }) });
    const sluice = await startNodeSluice({ env, maxSleepMs: 3_600_000 });
    try {
      endpoint.received.length = 0;
      endpoint.reply(() => ({ status: 200 }));
      for (let i = 0; i < 5; i++) {
        const res = await fetch(`${sluice.url}/v1/tasks`, {
          method: 'POST',
          headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ queue: 'paced', url: `${endpoint.url}/n`, body: { i } }),
        });
        expect(res.status).toBe(201);
      }
      await endpoint.waitFor(5, 10_000);
      // Five at two per 500 ms: on the claims' clock, the fifth waited for the third window.
      await expect.poll(async () => (await t.db.query(`select 1 from sluice.all_attempts`)).length).toBe(5);
      const [span] = await t.db.query<{ ms: number }>(
        `select (extract(epoch from max(started_at) - min(started_at)) * 1000)::float8 as ms from sluice.all_attempts`,
      );
      const gap = span!.ms;
      expect(gap).toBeGreaterThanOrEqual(1_000);
      console.info(`node: 5 tasks at 2 per 500 ms pushed over ${gap} ms`);
    } finally {
      await sluice.close();
    }
  });

  it('take rates from the API: refused when malformed or keyless, shown with their source, overridden at run time', async () => {
    const admin = await generateApiKey('admin', ['admin']);
    const env = testEnv(secrets, t.url, {
      SLUICE_API_KEYS: JSON.stringify([...JSON.parse(secrets.apiKeysJson), admin.entry]),
      SLUICE_QUEUES: JSON.stringify({ paced: { key_rate: { limit: 2, period_ms: 500 } } }),
    });
    const sluice = await startNodeSluice({ env, dispatch: false });
    const call = (path: string, method: string, body: unknown, key = secrets.apiKey) =>
      fetch(`${sluice.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    try {
      const keyless = await call('/v1/tasks', 'POST', {
        queue: 'paced',
        url: `${endpoint.url}/x`,
        rate_limit: { limit: 1, period_ms: 1000 },
      });
      expect(keyless.status).toBe(400);
      expect(JSON.stringify(await keyless.json())).toContain('rate_limit');
      const zero = await call('/v1/tasks', 'POST', {
        url: `${endpoint.url}/x`,
        concurrency_key: 'a',
        rate_limit: { limit: 1, period_ms: 0 },
      });
      expect(zero.status).toBe(400);
      expect(JSON.stringify(await zero.json())).toContain('rate_limit.period_ms');
      const ok = await call('/v1/tasks', 'POST', {
        url: `${endpoint.url}/x`,
        concurrency_key: 'a',
        rate_limit: { limit: 3, period_ms: 1000 },
      });
      expect(ok.status).toBe(201);
      expect(((await ok.json()) as { rate_limit: unknown }).rate_limit).toEqual({ limit: 3, period_ms: 1000 });

      const put = await call('/v1/queues/paced', 'PUT', { rate: { limit: 10, period_ms: 1000 } }, admin.key);
      expect(put.status).toBe(200);
      const view = (await put.json()) as { rate: unknown; key_rate: unknown };
      expect(view.rate).toEqual({ value: { limit: 10, period_ms: 1000 }, source: 'override' });
      expect(view.key_rate).toEqual({ value: { limit: 2, period_ms: 500 }, source: 'env' });
      const cleared = (await (await call('/v1/queues/paced', 'PUT', { rate: null }, admin.key)).json()) as { rate: unknown };
      expect(cleared.rate).toEqual({ value: null, source: 'default' });
    } finally {
      await sluice.close();
    }
  });
});
