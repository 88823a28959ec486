/**
 * Key strategies under racing enqueues and dispatchers: 8 clients enqueue into few keys while 4
 * dispatchers push over real HTTP, and a ninth connection samples the unfinished tasks the whole
 * time. Under `cancel_newest` a key never holds two unfinished tasks; under `cancel_in_progress`
 * no push of a task that ends cancelled is acknowledged as a success.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.ts';
import type { KeyStrategy } from '../../src/core/queue-settings.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import type { RunReport } from '../../src/dispatcher/report.ts';
import { dispatchRun } from '../../src/dispatcher/run.ts';
import { openPgDb } from '../../src/node/pg-db.ts';
import { loadKeyring } from '../../src/security/keyring.ts';
import { testConfig } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';
import { newTask } from '../helpers/tasks.ts';

const QUEUES: Record<string, { key_strategy: KeyStrategy; key_concurrency?: number }> = {
  newest: { key_strategy: 'cancel_newest' },
  cip: { key_strategy: 'cancel_in_progress', key_concurrency: 1 },
};

let t: TestDatabase;
let endpoint: TestEndpoint;
let config: Config;

beforeAll(async () => {
  t = await createTestDatabase();
  endpoint = await startEndpoint();
  ({ config } = await testConfig(t.url, { SLUICE_QUEUES: JSON.stringify(QUEUES), SLUICE_DISPATCH_PARALLELISM: '6' }));
});
afterAll(async () => {
  await endpoint.close();
  await t.drop();
});

describe('key strategies under racing enqueues and dispatchers', () => {
  it('never leave two unfinished tasks of a cancel_newest key, nor acknowledge a cancelled push', async () => {
    endpoint.reply(() => ({ status: 200, body: 'ok', delayMs: Math.random() * 15 }));
    const violations: string[] = [];
    let enqueuing = true;
    let skipped = 0;

    const client = async (c: number) => {
      const db = openPgDb(t.url, 1);
      try {
        for (let i = 0; i < 40; i++) {
          const queue = i % 2 === 0 ? 'newest' : 'cip';
          const key = `k${(c + i) % 3}`;
          const one = () => newTask({ queue, url: `${endpoint.url}/work`, concurrencyKey: key, keyStrategy: QUEUES[queue]!.key_strategy });
          const results = await taskInsertMany(db, i % 5 === 0 ? [one(), one(), one()] : [one()]);
          skipped += results.filter((r) => r.skipped).length;
        }
      } finally {
        await db.close();
      }
    };

    const keyring = await loadKeyring(config.signingKeys);
    const reports: RunReport[] = [];
    const dispatcher = async () => {
      const db = openPgDb(t.url, 3);
      try {
        for (;;) {
          const report = await dispatchRun({ db, config, keyring }, { budgetMs: 30_000 });
          reports.push(report);
          const [left] = await db.query<{ n: number }>(
            `select count(*)::int as n from sluice.tasks where status in ('pending', 'leased', 'waiting')`,
          );
          if (!enqueuing && left!.n === 0) return;
          if (report.claimed === 0) await new Promise((r) => setTimeout(r, 5));
        }
      } finally {
        await db.close();
      }
    };

    const sampler = (async () => {
      const db = openPgDb(t.url, 1);
      let samples = 0;
      while (enqueuing || samples === 0) {
        samples++;
        const rows = await db.query<{ key: string; n: number }>(
          `select concurrency_key as key, count(*)::int as n from sluice.tasks
           where queue = 'newest' and status in ('pending', 'leased', 'waiting') group by concurrency_key having count(*) > 1`,
        );
        for (const r of rows) violations.push(`newest/${r.key}: ${r.n} unfinished`);
      }
      await db.close();
      return samples;
    })();

    const dispatchers = Array.from({ length: 4 }, dispatcher);
    await Promise.all(Array.from({ length: 8 }, (_, c) => client(c)));
    enqueuing = false;
    const samples = await sampler;
    await Promise.all(dispatchers);

    expect(violations).toEqual([]);
    const [state] = await t.db.query<{ succeeded: number; cancelled: number; leased_cancels: number; other: number; wrong: number }>(
      `select count(*) filter (where status = 'succeeded')::int as succeeded,
              count(*) filter (where status = 'cancelled')::int as cancelled,
              count(*) filter (where status = 'cancelled' and final_started_at is not null)::int as leased_cancels,
              count(*) filter (where status not in ('succeeded', 'cancelled'))::int as other,
              count(*) filter (where status = 'cancelled' and exists (
                select 1 from sluice.all_attempts a where a.task_id = f.id and a.outcome = 'succeeded'))::int as wrong
       from sluice.finished f`,
    );
    // Every push acknowledged as a success is a task that ended succeeded, and none that ended cancelled.
    const acknowledged = reports.reduce((s, r) => s + r.succeeded, 0);
    expect(acknowledged).toBe(state!.succeeded);
    expect(state).toMatchObject({ other: 0, wrong: 0 });
    const [{ n: live } = { n: -1 }] = await t.db.query<{ n: number }>('select count(*)::int as n from sluice.tasks');
    expect(live).toBe(0);
    // The race was run: keys were skipped, and leases were cancelled while their push was out.
    expect(skipped).toBeGreaterThan(0);
    expect(state!.leased_cancels).toBeGreaterThan(0);
    const lost = reports.reduce((s, r) => s + r.lost, 0);
    console.info(
      `key strategies race: ${state!.succeeded} succeeded, ${state!.cancelled} cancelled (${state!.leased_cancels} while leased), ${skipped} skipped, ${lost} answers ignored; ${samples} samples`,
    );
  });
});
