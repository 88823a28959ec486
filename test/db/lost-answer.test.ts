/**
 * Writes retried after a lost answer, on the Node path: the statement commits, the connection
 * is cut before the client hears so (test/helpers/lost-answer.ts), and the retry must find its
 * work done and say what was done, never fail and never do it twice. Issue 38: the retry of a
 * batched settle failed, the batch's leases expired and their tasks were pushed again.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { expiryOutcome } from '../../src/core/lease.ts';
import { decide } from '../../src/core/outcome.ts';
import type { LeasedTask } from '../../src/core/types.ts';
import { taskClaimBatch } from '../../src/db/claim.ts';
import type { OpenDb } from '../../src/db/db.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { taskAttempts } from '../../src/db/leases.ts';
import { leaseEnding } from '../../src/db/settle.ts';
import { taskGet } from '../../src/db/tasks.ts';
import { Settler } from '../../src/dispatcher/settler.ts';
import { openPgDb } from '../../src/node/pg-db.ts';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, emptyTables, type TestDatabase } from '../helpers/db.ts';
import { type ReceivedPush, startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';
import { type LostAnswers, lostAnswers, startLossyProxy } from '../helpers/lost-answer.ts';
import { newTask } from '../helpers/tasks.ts';

const SETTLE = /\bwith raw as \(/;

let t: TestDatabase;
let faults: LostAnswers;
let proxy: Awaited<ReturnType<typeof startLossyProxy>>;
/** The test's database, reached through the proxy that loses answers. */
let lossy: OpenDb;
let proxyUrl: string;

beforeAll(async () => {
  t = await createTestDatabase();
  faults = lostAnswers();
  proxy = await startLossyProxy({ host: '127.0.0.1', port: inject('pgPort') }, faults);
  const url = new URL(t.url);
  url.host = `127.0.0.1:${proxy.port}`;
  proxyUrl = url.toString();
  lossy = openPgDb(proxyUrl, 4);
});
afterAll(async () => {
  await lossy?.close();
  await proxy?.close();
  await t?.drop();
});
beforeEach(() => emptyTables(t.db, 'sluice.tasks, sluice.lanes'));

/** `n` tasks, leased; with `ago`, leased that long ago (their leases of a minute expired if it is longer). */
async function claim(n: number, ago = 0): Promise<LeasedTask[]> {
  const now = new Date(Date.now() - ago);
  await taskInsertMany(
    t.db,
    Array.from({ length: n }, (_, i) => newTask({ body: `{"n":${i}}`, runAt: new Date(now.getTime() - 1_000) })),
  );
  return taskClaimBatch(t.db, { max: n, clusterCap: null, queuesJson: '{}', now });
}

const succeeded = (task: LeasedTask) =>
  leaseEnding(task, decide(task, { type: 'succeeded', result: 'ok', status: 200 }, Date.now(), 0.5), 5);
const failed = (task: LeasedTask) =>
  leaseEnding(task, decide(task, { type: 'failed', retryable: true, error: 'HTTP 500', status: 500 }, Date.now(), 0.5), 5);

describe("a settle whose answer was lost (the dispatcher's group commit)", () => {
  it('is retried, finds its batch done, and says each lease was held', async () => {
    const tasks = await claim(3);
    const settler = new Settler(lossy);
    faults.arm(SETTLE);
    const held = await Promise.all([
      settler.settle(succeeded(tasks[0]!)),
      settler.settle(failed(tasks[1]!)),
      settler.settle(succeeded(tasks[2]!)),
    ]);
    expect(faults.lost).toBe(1);
    expect(settler.writes).toBe(1);
    expect(held).toEqual([true, true, true]);
    expect((await taskGet(t.db, tasks[0]!.id))?.status).toBe('succeeded');
    expect((await taskGet(t.db, tasks[1]!.id))?.status).toBe('pending');
    expect(await taskAttempts(t.db, tasks[1]!.id)).toMatchObject([{ leaseId: tasks[1]!.lease.id, outcome: 'retry' }]);
  });

  it('alone: a retry is one attempt, and the lease was held', async () => {
    const [task] = await claim(1);
    const settler = new Settler(lossy);
    faults.arm(SETTLE);
    expect(await settler.settle(failed(task!))).toBe(true);
    expect(await taskAttempts(t.db, task!.id)).toHaveLength(1);
  });

  it("names a lease once in a batch: a push's answer and the reaper's expiry of it meet, and the others settle", async () => {
    // After an outage a reap reads leases that expired while their pushes' settles waited; both
    // endings of one lease then share a write. That write met its own attempts row and failed
    // whole (attempts_pkey), every lease in it left to expire and its task pushed again.
    const [a, b] = await claim(2, 120_000);
    const settler = new Settler(t.db);
    const expiry = leaseEnding(a!, decide(a!, expiryOutcome(a!, a!.lease.expiresAt), Date.now(), 0.5), null);
    const results = await Promise.allSettled([
      settler.settle(failed(a!)),
      settler.settle({ ...expiry, require: 'expired' }),
      settler.settle(succeeded(b!)),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    expect(results.map((r) => (r as PromiseFulfilledResult<boolean>).value)).toEqual([true, false, true]);
    expect(await taskAttempts(t.db, a!.id)).toMatchObject([{ outcome: 'retry', error: 'HTTP 500' }]);
    expect((await taskGet(t.db, b!.id))?.status).toBe('succeeded');
  });
});

describe('lease calls and enqueues whose answer was lost (the Node server)', () => {
  let endpoint: TestEndpoint;
  let sluice: NodeSluice;
  let secrets: TestSecrets;

  beforeAll(async () => {
    [endpoint, secrets] = await Promise.all([startEndpoint(), makeSecrets()]);
    sluice = await startNodeSluice({ env: testEnv(secrets, proxyUrl, { SLUICE_LEASE_MS: '30000', SLUICE_PUSH_TIMEOUT_MS: '5000' }) });
  });
  afterAll(async () => {
    await sluice?.close();
    await endpoint?.close();
  });
  beforeEach(() => {
    endpoint.received.length = 0;
    endpoint.reply(() => ({ status: 202, headers: { 'Sluice-Ack': 'lease' } }));
  });

  async function api(path: string, body: unknown, token = secrets.apiKey) {
    const res = await fetch(`${sluice.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  }
  async function kept(): Promise<ReceivedPush> {
    await api('/v1/tasks', { url: `${endpoint.url}/work` });
    const [push] = await endpoint.waitFor(1);
    return push!;
  }
  /** The call, its answer lost once: the first answer, then the same call's. */
  async function callTwice(push: ReceivedPush, action: string, body: unknown) {
    const path = `/v1/leases/${push.headers['sluice-lease-id']}/${action}`;
    const token = push.headers['sluice-lease-token'] as string;
    faults.arm(SETTLE);
    const first = await api(path, body, token);
    return [first, await api(path, body, token)] as const;
  }

  for (const [action, body, status] of [
    ['fail', { error: 'disk full' }, 'pending'],
    ['fail', { error: 'bad input', retry: false }, 'dead'],
    ['release', { delay_ms: 60_000 }, 'pending'],
    ['complete', { result: 'done' }, 'succeeded'],
  ] as const) {
    it(`${action} ${JSON.stringify(body)} again: the same answer, said to repeat it, and one ending`, async () => {
      const push = await kept();
      const [first, again] = await callTwice(push, action, body);
      expect(faults.lost).toBeGreaterThan(0);
      expect(first.status).toBe(503);
      expect(again).toEqual({ status: 200, json: { task_id: push.headers['sluice-task-id'], status, repeated: true } });
      const attempts = await taskAttempts(t.db, push.headers['sluice-task-id'] as string);
      expect(attempts.filter((a) => a.leaseId === push.headers['sluice-lease-id'])).toHaveLength(1);
    });
  }

  it('heartbeat again: extended, from the second call', async () => {
    const push = await kept();
    const path = `/v1/leases/${push.headers['sluice-lease-id']}/heartbeat`;
    faults.arm(/^\s*update sluice\.tasks t\s+set lease_expires_at/);
    const first = await api(path, { extend_ms: 10_000 }, push.headers['sluice-lease-token'] as string);
    const again = await api(path, { extend_ms: 10_000 }, push.headers['sluice-lease-token'] as string);
    expect([first.status, again.status]).toEqual([503, 200]);
  });

  it('an enqueue with a dedup_key, sent again after its commit was lost: the same task, once', async () => {
    endpoint.reply(() => ({ status: 200 }));
    // A dedup key makes the enqueue a transaction: its COMMIT's answer is the one lost.
    faults.arm(/^commit$/i);
    const item = { url: `${endpoint.url}/work`, dedup_key: 'order-7', delay_ms: 60_000 };
    const first = await api('/v1/tasks', item);
    const again = await api('/v1/tasks', item);
    expect(first.status).toBe(503);
    expect(again.status).toBe(200);
    expect(again.json).toMatchObject({ deduplicated: true });
    const rows = await t.db.query<{ n: number }>(`select count(*)::int as n from sluice.tasks where dedup_key = 'order-7'`);
    expect(rows[0]!.n).toBe(1);
  });
});
