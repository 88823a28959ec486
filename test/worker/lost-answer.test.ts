/**
 * Writes retried after a lost answer, on the Worker path: the Neon stand-in lets the statement
 * commit and then cuts the connection before the driver hears so (test/helpers/lost-answer.ts),
 * on the shards' WebSocket connections and on the API's /sql requests. The retry must find its
 * work done and say what was done (issue 38).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { bundleWorker, type RunningWorker, startWorker } from '../../src/node/worker-runtime.ts';
import { type RunningProxy, startWsProxy } from '../../src/node/ws-proxy.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, emptyTables, type TestDatabase } from '../helpers/db.ts';
import { type ReceivedPush, startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';
import { type LostAnswers, lostAnswers } from '../helpers/lost-answer.ts';

const SETTLE = /\bwith raw as \(/;

let t: TestDatabase;
let faults: LostAnswers;
let proxy: RunningProxy;
let endpoint: TestEndpoint;
let secrets: TestSecrets;
let worker: RunningWorker;

beforeAll(async () => {
  faults = lostAnswers();
  [t, proxy, endpoint, secrets] = await Promise.all([
    createTestDatabase(),
    startWsProxy({ host: '127.0.0.1', port: inject('pgPort') }, { fault: faults }),
    startEndpoint(),
    makeSecrets(),
  ]);
  worker = await startWorker({
    script: await bundleWorker(),
    vars: testEnv(secrets, t.url, { SLUICE_NEON_WS_PROXY: proxy.address, SLUICE_LEASE_MS: '30000', SLUICE_PUSH_TIMEOUT_MS: '5000' }),
  });
});
afterAll(async () => {
  await worker?.close();
  await Promise.all([endpoint?.close(), proxy?.close()]);
  await t?.drop();
});
beforeEach(async () => {
  await emptyTables(t.db, 'sluice.tasks, sluice.lanes, sluice.counters');
  endpoint.received.length = 0;
  endpoint.reply(() => ({ status: 202, headers: { 'Sluice-Ack': 'lease' } }));
});

async function api(path: string, body: unknown, token = secrets.apiKey) {
  const res = await fetch(`${worker.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

async function until<T>(probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("a shard's settle whose answer was lost", () => {
  it('is retried, and every push is counted as it ended, once', async () => {
    // Answered together, so that their settles share writes.
    endpoint.reply(() => ({ status: 200, delayMs: 200 }));
    faults.arm(SETTLE);
    const items = Array.from({ length: 4 }, (_, i) => ({ url: `${endpoint.url}/work`, body: { i } }));
    expect((await api('/v1/tasks/batch', { tasks: items })).status).toBe(201);
    await endpoint.waitFor(4);
    const counted = await until(async () => {
      const rows = await t.db.query<{ label: string; value: number }>(`select label, value from sluice.counters where metric = 'pushes'`);
      return rows.reduce((n, r) => n + r.value, 0) >= 4 ? rows : undefined;
    });
    expect(faults.lost).toBe(1);
    expect(counted).toEqual([{ label: 'succeeded', value: 4 }]);
    const statuses = await t.db.query<{ status: string }>('select status from sluice.all_tasks');
    expect(statuses.map((s) => s.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
    await new Promise((r) => setTimeout(r, 300));
    expect(endpoint.received).toHaveLength(4);
  });
});

describe('lease calls and enqueues whose answer was lost (the API, over /sql)', () => {
  async function kept(): Promise<ReceivedPush> {
    expect((await api('/v1/tasks', { url: `${endpoint.url}/work` })).status).toBe(201);
    const [push] = await endpoint.waitFor(1);
    return push!;
  }

  for (const [action, body, status] of [
    ['fail', { error: 'disk full' }, 'pending'],
    ['release', { delay_ms: 60_000 }, 'pending'],
    ['complete', { result: 'done' }, 'succeeded'],
  ] as const) {
    it(`${action} again: the same answer, said to repeat it`, async () => {
      const push = await kept();
      const path = `/v1/leases/${push.headers['sluice-lease-id']}/${action}`;
      const token = push.headers['sluice-lease-token'] as string;
      const lostBefore = faults.lost;
      faults.arm(SETTLE);
      const first = await api(path, body, token);
      const again = await api(path, body, token);
      expect(faults.lost).toBe(lostBefore + 1);
      expect(first.status).toBe(503);
      expect(again).toEqual({ status: 200, json: { task_id: push.headers['sluice-task-id'], status, repeated: true } });
    });
  }

  it('an enqueue with a dedup_key, sent again after its commit was lost: the same task, once', async () => {
    endpoint.reply(() => ({ status: 200 }));
    faults.arm(/^commit$/i);
    const item = { url: `${endpoint.url}/work`, dedup_key: 'order-7', delay_ms: 60_000 };
    const first = await api('/v1/tasks', item);
    const again = await api('/v1/tasks', item);
    expect(first.status).toBe(503);
    expect(again).toMatchObject({ status: 200, json: { deduplicated: true } });
    const rows = await t.db.query<{ n: number }>(`select count(*)::int as n from sluice.tasks where dedup_key = 'order-7'`);
    expect(rows[0]!.n).toBe(1);
  });

  it('an enqueue without one: 503, never an answer it cannot vouch for', async () => {
    faults.arm(/insert into sluice\.tasks/);
    const first = await api('/v1/tasks', { url: `${endpoint.url}/work`, delay_ms: 60_000 });
    expect(first.status).toBe(503);
  });
});
