/**
 * Racing dispatchers under every limit at once: 8 dispatchers, thousands of tasks over four
 * queues and many keys with mixed limits, pushed over real HTTP to an endpoint that records
 * in-flight per key, per queue and overall at every instant.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import type { NewTask } from '../../src/db/new-task.ts';
import { keyLimitPut } from '../../src/db/queues.ts';
import type { RunReport } from '../../src/dispatcher/report.ts';
import { dispatchRun } from '../../src/dispatcher/run.ts';
import { openPgDb } from '../../src/node/pg-db.ts';
import { loadKeyring } from '../../src/security/keyring.ts';
import { testConfig } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';
import { newTask } from '../helpers/tasks.ts';

const CLUSTER_CAP = 24;
const QUEUES = {
  q1: { concurrency: 10, key_concurrency: 3 },
  q2: { concurrency: 6 },
  q3: { key_concurrency: 2 },
  q4: { concurrency: 8, key_concurrency: 1 },
};
/** Run-time override for one key, and a limit given by tasks at enqueue. */
const KEY_OVERRIDE = { queue: 'q1', key: 'k0', limit: 1 };
const TASK_LIMIT = { queue: 'q3', key: 'k1', limit: 4 };

function keyLimit(queue: keyof typeof QUEUES, key: string | null): number | null {
  if (key === null) return null;
  if (queue === KEY_OVERRIDE.queue && key === KEY_OVERRIDE.key) return KEY_OVERRIDE.limit;
  if (queue === TASK_LIMIT.queue && key === TASK_LIMIT.key) return TASK_LIMIT.limit;
  return (QUEUES[queue] as { key_concurrency?: number }).key_concurrency ?? null;
}

let t: TestDatabase;
let endpoint: TestEndpoint;
let config: Config;

beforeAll(async () => {
  t = await createTestDatabase();
  endpoint = await startEndpoint();
  ({ config } = await testConfig(t.url, {
    SLUICE_CLUSTER_CAP: String(CLUSTER_CAP),
    SLUICE_QUEUES: JSON.stringify(QUEUES),
    SLUICE_DISPATCH_PARALLELISM: '6',
    SLUICE_MAX_CLAIM_BATCH: '8',
  }));
});
afterAll(async () => {
  await endpoint.close();
  await t.drop();
});

describe('limits under racing dispatchers', () => {
  it('are never exceeded, and every task is delivered exactly once', async () => {
    await keyLimitPut(t.db, KEY_OVERRIDE.queue, KEY_OVERRIDE.key, KEY_OVERRIDE.limit);
    const tasks: NewTask[] = [];
    const names = Object.keys(QUEUES) as Array<keyof typeof QUEUES>;
    for (let i = 0; i < 3_000; i++) {
      const queue = names[i % names.length]!;
      const key = i % 7 === 0 ? null : `k${i % 13}`;
      tasks.push(
        newTask({
          queue,
          url: `${endpoint.url}/work`,
          concurrencyKey: key,
          concurrencyLimit: queue === TASK_LIMIT.queue && key === TASK_LIMIT.key ? TASK_LIMIT.limit : null,
          priority: i % 3,
          body: String(i),
        }),
      );
    }
    for (let i = 0; i < tasks.length; i += 1_000) await taskInsertMany(t.db, tasks.slice(i, i + 1_000));

    // The endpoint: count what is in flight at every arrival, hold the request a moment.
    const now = { cluster: 0, queue: new Map<string, number>(), key: new Map<string, number>() };
    const peak = { cluster: 0, queue: new Map<string, number>(), key: new Map<string, number>() };
    const violations: string[] = [];
    const bump = (map: Map<string, number>, k: string, by: number) => {
      const v = (map.get(k) ?? 0) + by;
      map.set(k, v);
      return v;
    };
    endpoint.reply(async (push) => {
      const queue = push.headers['sluice-queue'] as keyof typeof QUEUES;
      const rawKey = push.headers['sluice-concurrency-key'] as string | undefined;
      const key = rawKey === undefined ? null : decodeURIComponent(rawKey);
      const laneId = `${queue}/${key}`;
      const c = ++now.cluster;
      const q = bump(now.queue, queue, 1);
      const k = bump(now.key, laneId, 1);
      peak.cluster = Math.max(peak.cluster, c);
      peak.queue.set(queue, Math.max(peak.queue.get(queue) ?? 0, q));
      peak.key.set(laneId, Math.max(peak.key.get(laneId) ?? 0, k));
      const qLimit = (QUEUES[queue] as { concurrency?: number }).concurrency;
      const kLimit = keyLimit(queue, key);
      if (c > CLUSTER_CAP) violations.push(`cluster ${c} > ${CLUSTER_CAP}`);
      if (qLimit !== undefined && q > qLimit) violations.push(`${queue} ${q} > ${qLimit}`);
      if (kLimit !== null && k > kLimit) violations.push(`${laneId} ${k} > ${kLimit}`);
      await new Promise((r) => setTimeout(r, Math.random() * 6));
      now.cluster--;
      bump(now.queue, queue, -1);
      bump(now.key, laneId, -1);
      return { status: 200 };
    });

    const keyring = await loadKeyring(config.signingKeys);
    const reports: RunReport[] = [];
    const dispatcher = async () => {
      const db = openPgDb(t.url, 3);
      try {
        for (;;) {
          const report = await dispatchRun({ db, config, keyring }, { budgetMs: 30_000 });
          reports.push(report);
          const [left] = await db.query<{ n: number }>(
            `select count(*)::int as n from sluice.all_tasks where status in ('pending', 'leased')`,
          );
          if (left!.n === 0) return;
          if (report.claimed === 0) await new Promise((r) => setTimeout(r, 5));
        }
      } finally {
        await db.close();
      }
    };
    // A ninth connection samples the leased rows themselves, back to back, the whole time.
    let running = true;
    const dbPeak = { cluster: 0, samples: 0 };
    const sampler = (async () => {
      const db = openPgDb(t.url, 1);
      while (running) {
        const rows = await db.query<{ queue: string; lane: string; n: number }>(
          `select queue, lane, count(*)::int as n from sluice.all_tasks where status = 'leased' group by rollup (queue, lane)`,
        );
        dbPeak.samples++;
        for (const r of rows) {
          if (r.queue === null) {
            dbPeak.cluster = Math.max(dbPeak.cluster, r.n);
            if (r.n > CLUSTER_CAP) violations.push(`db: cluster ${r.n}`);
          } else if (r.lane === null) {
            const limit = (QUEUES[r.queue as keyof typeof QUEUES] as { concurrency?: number }).concurrency;
            if (limit !== undefined && r.n > limit) violations.push(`db: ${r.queue} ${r.n} > ${limit}`);
          } else {
            const limit = keyLimit(r.queue as keyof typeof QUEUES, r.lane === '' ? null : r.lane.slice(2));
            if (limit !== null && r.n > limit) violations.push(`db: ${r.queue}/${r.lane} ${r.n} > ${limit}`);
          }
        }
      }
      await db.close();
    })();

    const started = Date.now();
    await Promise.all(Array.from({ length: 8 }, dispatcher));
    const seconds = (Date.now() - started) / 1000;
    running = false;
    await sampler;

    expect(violations).toEqual([]);
    const ids = endpoint.received.map((p) => p.headers['sluice-task-id']);
    expect(ids).toHaveLength(3_000);
    expect(new Set(ids).size).toBe(3_000);
    const [state] = await t.db.query<{ succeeded: number; leased: number }>(
      `select count(*) filter (where status = 'succeeded')::int as succeeded, count(*) filter (where status = 'leased')::int as leased from sluice.all_tasks`,
    );
    expect(state).toEqual({ succeeded: 3_000, leased: 0 });
    // The limits were reached, not merely respected by an idle system.
    expect(dbPeak.cluster).toBeGreaterThanOrEqual(CLUSTER_CAP - 4);
    expect(peak.cluster).toBeGreaterThan(CLUSTER_CAP / 2);
    expect(peak.key.get('q1/k0')).toBe(1);

    const claimed = reports.reduce((s, r) => s + r.claimed, 0);
    const passes = reports.reduce((s, r) => s + r.claimPasses, 0);
    const trips = reports.reduce((s, r) => s + r.roundTrips, 0);
    console.info(
      `limits race: 3000 tasks, 8 dispatchers, ${seconds.toFixed(1)} s; leased rows sampled ${dbPeak.samples} times, peak ${dbPeak.cluster}/${CLUSTER_CAP}; ` +
        `at the endpoint: peaks cluster ${peak.cluster}/${CLUSTER_CAP}, ` +
        `queues ${JSON.stringify(Object.fromEntries(peak.queue))}, key q1/k0 ${peak.key.get('q1/k0')}/1, q3/k1 ${peak.key.get('q3/k1')}/4, ` +
        `q4 keys max ${Math.max(...[...peak.key].filter(([k]) => k.startsWith('q4/') && !k.endsWith('/null')).map(([, v]) => v))}/1; ` +
        `${passes} claim passes, ${(trips / claimed).toFixed(2)} round trips per claimed task`,
    );
  });
});
