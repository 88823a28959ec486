/**
 * Due-time dispatch on the real Worker in workerd (docs/DESIGN.md §6): the scheduler Durable
 * Object's alarm and the pusher shards, with the cron never fired unless a test says so.
 * Retries, delays, Retry-After deferrals and abandoned leases are pushed when due; shards push
 * side by side within the limits; a scheduler that lost its alarm is repaired by the cron.
 * Gaps are printed, not asserted: speed belongs to the benchmark (`npm run bench:dispatch`).
 */
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { taskInsertMany } from '../../src/db/enqueue.ts';
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
  await emptyTables(t.db, 'sluice.tasks, sluice.lanes');
  endpoint.received.length = 0;
  endpoint.reply(() => ({ status: 200 }));
});

async function enqueue(base: string, body: Record<string, unknown>, path = '/v1/tasks'): Promise<Record<string, unknown>> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(201);
  return (await res.json()) as Record<string, unknown>;
}
const task = (extra: Record<string, unknown> = {}) => ({ url: `${endpoint.url}/work`, ...extra });
const gap = (pushes: { receivedAt: number }[]) => pushes[1]!.receivedAt - pushes[0]!.receivedAt;

// First in the file: before any test has set an alarm on this Worker's scheduler, so the only
// thing that can push these tasks is the cron.
describe('the cron, the safety net', () => {
  it('repairs a scheduler that lost its alarm: the cron alone gets the task pushed', async () => {
    // A delayed task the scheduler never heard of (written straight to the database): exactly
    // what a lost alarm leaves behind. Past its due time nothing has pushed it.
    await taskInsertMany(t.db, [newTask({ url: `${endpoint.url}/lost`, delayMs: 300 })]);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(endpoint.received).toHaveLength(0);
    await worker.scheduled();
    await endpoint.waitFor(1);
  });

  it('sets the alarm a lost one would have set: a task due later is pushed when due, after one cron', async () => {
    const [enqueued] = await taskInsertMany(t.db, [newTask({ url: `${endpoint.url}/later`, delayMs: 1_500 })]);
    await worker.scheduled();
    const [push] = await endpoint.waitFor(1);
    expect(push!.receivedAt).toBeGreaterThanOrEqual(enqueued!.task.runAt.getTime());
  });

  it('drops history buckets closed longer ago than the retention window (7 days by default), and no others', async () => {
    // Due in an hour, so that no shard still draining from the tests before pushes them; finished
    // in place below, as a dispatcher of an earlier version would (the cron's sweep moves such
    // rows into the open bucket).
    const [old, recent] = await taskInsertMany(t.db, [
      newTask({ url: `${endpoint.url}/old`, delayMs: 3_600_000 }),
      newTask({ url: `${endpoint.url}/recent`, delayMs: 3_600_000 }),
    ]);
    const finish = (id: string) =>
      t.db.query(
        `update sluice.tasks set status = 'succeeded', lease_id = null, leased_at = null, lease_expires_at = null, finished_at = now()
         where id = $1 and status <> 'succeeded'`,
        [id],
      );
    // Time passes in the buckets' own times: the open one was opened a day ago (older than its
    // width, an eighth of the window), so the cron closes it once it holds the old task...
    await finish(old!.task.id);
    await t.db.query(
      `update sluice.history_buckets set opened_at = now() - interval '1 day' where bucket = (select max(bucket) from sluice.history_buckets)`,
    );
    await worker.scheduled();
    const [closed] = await t.db.query<{ bucket: string }>(
      'select max(bucket)::text as bucket from sluice.history_buckets where closed_at is not null',
    );
    // ...which then closed eight days ago, past the window.
    await t.db.query(`update sluice.history_buckets set closed_at = now() - interval '8 days' where bucket = $1`, [closed!.bucket]);
    await finish(recent!.task.id);
    await worker.scheduled();
    const left = await t.db.query<{ id: string }>('select id::text from sluice.all_tasks');
    expect(left).toEqual([{ id: recent!.task.id }]);
  });

  it('reaps expired leases itself, whatever the shards do', async () => {
    const [enqueued] = await taskInsertMany(t.db, [newTask({ url: `${endpoint.url}/reaped`, leaseMs: 1_000, timeoutMs: 500 })]);
    await t.db.query(
      `update sluice.tasks set status = 'leased', lease_id = gen_random_uuid(), leased_at = now() - interval '5 seconds',
       lease_expires_at = now() - interval '4 seconds', attempts = 1 where id = $1`,
      [enqueued!.task.id],
    );
    await worker.scheduled();
    const [row] = await t.db.query<{ attempts: number; last_error: string }>(
      'select attempts, last_error from sluice.all_tasks where id = $1',
      [enqueued!.task.id],
    );
    expect(row).toMatchObject({ attempts: 1, last_error: expect.stringMatching(/lease expired/) });
  });
});

describe('the scheduler wakes the shards when work comes due (no cron)', () => {
  it('pushes a retry once its backoff has passed', async () => {
    endpoint.reply((push) => ({ status: endpoint.received.indexOf(push) === 0 ? 500 : 200 }));
    await enqueue(worker.url, task({ max_attempts: 3, backoff: { initial_ms: 200, max_ms: 200, factor: 1, jitter: 0 } }));
    const pushes = await endpoint.waitFor(2);
    expect(gap(pushes)).toBeGreaterThanOrEqual(200);
    expect(pushes[1]!.headers['sluice-attempt']).toBe('2');
    console.info(`worker: retry after a 200 ms backoff pushed ${gap(pushes)} ms after the first push`);
  });

  it('pushes a delayed task when it is due, not before', async () => {
    const { run_at } = await enqueue(worker.url, task({ delay_ms: 1_000 }));
    const [push] = await endpoint.waitFor(1);
    const late = push!.receivedAt - Date.parse(run_at as string);
    expect(late).toBeGreaterThanOrEqual(0);
    console.info(`worker: a task delayed 1 s pushed ${late} ms after it was due`);
  });

  it('pushes a 429 with Retry-After again after that long, using no attempt', async () => {
    endpoint.reply((push) => (endpoint.received.indexOf(push) === 0 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 200 }));
    await enqueue(worker.url, task());
    const pushes = await endpoint.waitFor(2);
    expect(gap(pushes)).toBeGreaterThanOrEqual(1_000);
    expect(pushes.map((p) => p.headers['sluice-attempt'])).toEqual(['1', '1']);
    console.info(`worker: a 429 with Retry-After: 1 pushed again ${gap(pushes)} ms later`);
  });

  it('pushes a task whose holder went silent again once its lease expires', async () => {
    endpoint.reply((push) =>
      endpoint.received.indexOf(push) === 0 ? { status: 202, headers: { 'Sluice-Ack': 'lease' } } : { status: 200 },
    );
    await enqueue(worker.url, task({ lease_ms: 1_000, timeout_ms: 500 }));
    const pushes = await endpoint.waitFor(2);
    expect(pushes[1]!.receivedAt).toBeGreaterThanOrEqual(Date.parse(pushes[0]!.headers['sluice-lease-expires-at'] as string));
    console.info(`worker: an abandoned 1 s lease pushed again ${gap(pushes)} ms after the first push`);
  });
});

describe('pusher shards', () => {
  /** Holds every push `ms`, counting how many are open at once. */
  function holdPushes(ms: number) {
    const seen = { open: 0, peak: 0 };
    endpoint.reply(async () => {
      seen.open++;
      seen.peak = Math.max(seen.peak, seen.open);
      await new Promise((r) => setTimeout(r, ms));
      seen.open--;
      return { status: 200 };
    });
    return seen;
  }

  it('push side by side, more than one shard can, and never past the cluster cap', async () => {
    // 2 pushes per shard, 3 shards, a cluster cap of 5: only several shards reach 5.
    const sharded = await f.start({ SLUICE_DISPATCH_PARALLELISM: '2', SLUICE_DISPATCH_SHARDS: '3', SLUICE_CLUSTER_CAP: '5' });
    try {
      const seen = holdPushes(300);
      // A batch announces 20 tasks: the scheduler wakes all three shards at once.
      await enqueue(sharded.url, { tasks: Array.from({ length: 20 }, () => task()) }, '/v1/tasks/batch');
      await endpoint.waitFor(20);
      expect(seen.peak).toBeGreaterThan(2);
      expect(seen.peak).toBeLessThanOrEqual(5);

      // Tasks nobody announced (written straight to the database; the cron's poke says only
      // "look now"): one shard starts, finds its claims full, and recruits the next.
      endpoint.received.length = 0;
      const recruited = holdPushes(300);
      await taskInsertMany(
        t.db,
        Array.from({ length: 20 }, () => newTask({ url: `${endpoint.url}/quiet` })),
      );
      await sharded.scheduled();
      await endpoint.waitFor(20);
      expect(recruited.peak).toBeGreaterThan(2);
      expect(recruited.peak).toBeLessThanOrEqual(5);
      const statuses = () =>
        t.db.query<{ status: string; n: number }>('select status, count(*)::int as n from sluice.all_tasks group by status');
      await expect.poll(statuses, { timeout: 5_000 }).toEqual([{ status: 'succeeded', n: 40 }]);
    } finally {
      await sharded.close();
    }
  });
});

describe('faults on the Worker path', () => {
  it('the connection to Postgres is cut mid-drain: shards recover, nothing is lost, no limit is exceeded', async () => {
    const sharded = await f.start({
      SLUICE_DISPATCH_PARALLELISM: '2',
      SLUICE_DISPATCH_SHARDS: '3',
      SLUICE_CLUSTER_CAP: '5',
      SLUICE_LEASE_MS: '2000',
      SLUICE_PUSH_TIMEOUT_MS: '1000',
    });
    try {
      const seen = { open: 0, peak: 0, ids: new Set<string>() };
      endpoint.reply(async (push) => {
        seen.open++;
        seen.peak = Math.max(seen.peak, seen.open);
        seen.ids.add(push.headers['sluice-task-id'] as string);
        await new Promise((r) => setTimeout(r, 100));
        seen.open--;
        return { status: 200 };
      });
      await enqueue(sharded.url, { tasks: Array.from({ length: 60 }, () => task()) }, '/v1/tasks/batch');
      await endpoint.waitFor(15);
      // Every WebSocket and HTTP connection the Neon driver had, gone at once.
      expect(f.proxy.cut()).toBeGreaterThan(0);
      const cutAt = Date.now();
      const succeeded = async () =>
        (await t.db.query<{ n: number }>(`select count(*)::int as n from sluice.all_tasks where status = 'succeeded'`))[0]!.n;
      await expect.poll(succeeded, { timeout: 30_000, interval: 100 }).toBe(60);
      console.info(`worker: Postgres connections cut mid-drain: all 60 succeeded ${Date.now() - cutAt} ms after the cut`);
      expect(seen.ids.size).toBe(60);
      expect(seen.peak).toBeLessThanOrEqual(5);
      expect(await t.db.query(`select 1 from sluice.all_tasks where status = 'leased'`)).toHaveLength(0);
    } finally {
      await sharded.close();
    }
  });
});
