/**
 * Key strategies (src/db/key-strategy.ts): what an enqueue does to a concurrency key with
 * unfinished tasks, from the environment or a run-time override, one enqueue and a batch, and
 * what becomes of a lease that `cancel_in_progress` ends (its push's answer, its holder's calls).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Settlement } from '../../src/core/outcome.ts';
import type { KeyStrategy } from '../../src/core/queue-settings.ts';
import type { LeasedTask } from '../../src/core/types.ts';
import { taskClaimBatch } from '../../src/db/claim.ts';
import { taskInsertMany, taskInsertManyRefs } from '../../src/db/enqueue.ts';
import { leaseHeartbeat } from '../../src/db/leases.ts';
import type { NewTask } from '../../src/db/new-task.ts';
import { queueOverrideDelete, queueOverridePatch } from '../../src/db/queues.ts';
import { leaseEnding, leaseSettleMany } from '../../src/db/settle.ts';
import { taskGet } from '../../src/db/tasks.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { newTask } from '../helpers/tasks.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t.drop();
});
beforeEach(async () => {
  await t.db.query(
    'truncate sluice.tasks, sluice.finished, sluice.attempts, sluice.lanes, sluice.queues, sluice.key_limits, sluice.rate_grants cascade',
  );
});

const QUEUES = JSON.stringify({});
const succeeded = (httpStatus: number, result: string): Settlement => ({ status: 'succeeded', result, httpStatus });
const keyed = (key: string | null, keyStrategy: KeyStrategy, more: Partial<NewTask> = {}) =>
  newTask({ queue: 'q', concurrencyKey: key, keyStrategy, ...more });
const status = async (id: string) => (await taskGet(t.db, id))!.status;
const claim = (max = 10) => taskClaimBatch(t.db, { max, clusterCap: null, queuesJson: QUEUES });

describe('key_strategy', () => {
  it('queue (the default) adds the task behind the key’s', async () => {
    const [a] = await taskInsertMany(t.db, [keyed('k', 'queue')]);
    const [b] = await taskInsertMany(t.db, [keyed('k', 'queue')]);
    expect(b!.task.id).not.toBe(a!.task.id);
    expect([await status(a!.task.id), await status(b!.task.id)]).toEqual(['pending', 'pending']);
  });

  it('cancel_newest makes nothing for a key with an unfinished task, and answers that task', async () => {
    const [a] = await taskInsertMany(t.db, [keyed('k', 'cancel_newest')]);
    expect(a!.skipped).toBeUndefined();
    const [b, other, keyless] = await taskInsertMany(t.db, [
      keyed('k', 'cancel_newest'),
      keyed('j', 'cancel_newest'),
      keyed(null, 'cancel_newest'),
    ]);
    expect(b).toMatchObject({ skipped: true, deduplicated: false, task: { id: a!.task.id } });
    expect(other!.skipped).toBeUndefined();
    expect(keyless!.skipped).toBeUndefined();
    // Leased, it still holds the key; finished, the key is free again.
    const [leased] = await claim(1);
    expect(leased!.id).toBe(a!.task.id);
    const [c] = await taskInsertManyRefs(t.db, [keyed('k', 'cancel_newest')]);
    expect(c).toMatchObject({ skipped: true, task: { id: a!.task.id, status: 'leased' } });
    await leaseSettleMany(t.db, [leaseEnding(leased!, succeeded(200, 'ok'), 5)]);
    const [d] = await taskInsertMany(t.db, [keyed('k', 'cancel_newest')]);
    expect(d!.skipped).toBeUndefined();
    const [n] = await t.db.query<{ n: number }>(`select count(*)::int as n from sluice.all_tasks where concurrency_key = 'k'`);
    expect(n!.n).toBe(2);
  });

  it('applies in order within a batch', async () => {
    const newest = await taskInsertMany(t.db, [keyed('k', 'cancel_newest'), keyed('k', 'cancel_newest')]);
    expect(newest[1]).toMatchObject({ skipped: true, task: { id: newest[0]!.task.id } });
    const replaced = await taskInsertMany(t.db, [
      keyed('r', 'replace_pending'),
      keyed('r', 'replace_pending'),
      keyed('r', 'replace_pending'),
    ]);
    expect(replaced.map((e) => e.task.status)).toEqual(['cancelled', 'cancelled', 'pending']);
    // Each cancel comes first, so the dedup key it held is free for the next item.
    const cancelling = await taskInsertMany(t.db, [
      keyed('d', 'cancel_in_progress', { dedupKey: 'x' }),
      keyed('d', 'cancel_in_progress', { dedupKey: 'x' }),
      keyed('d', 'cancel_in_progress'),
    ]);
    expect(cancelling.map((e) => [e.deduplicated, e.task.status])).toEqual([
      [false, 'cancelled'],
      [false, 'cancelled'],
      [false, 'pending'],
    ]);
    // An item that dedups onto another key's task makes nothing of its own key: the next one does.
    const [other] = await taskInsertMany(t.db, [keyed('e', 'queue', { dedupKey: 'y' })]);
    const onto = await taskInsertMany(t.db, [keyed('f', 'cancel_newest', { dedupKey: 'y' }), keyed('f', 'cancel_newest')]);
    expect(onto[0]).toMatchObject({ deduplicated: true, task: { id: other!.task.id } });
    expect(onto[1]!.skipped).toBeUndefined();
    expect(onto[1]!.task).toMatchObject({ concurrencyKey: 'f', status: 'pending' });
  });

  it('follows a run-time override, which wins over the environment', async () => {
    await queueOverridePatch(t.db, 'q', { key_strategy: 'cancel_newest' });
    const [a] = await taskInsertMany(t.db, [keyed('k', 'queue')]);
    const [b] = await taskInsertManyRefs(t.db, [keyed('k', 'queue')]);
    expect(b).toMatchObject({ skipped: true, task: { id: a!.task.id } });
    await queueOverridePatch(t.db, 'q', { key_strategy: 'queue' });
    const [c] = await taskInsertMany(t.db, [keyed('k', 'cancel_newest')]);
    expect(c!.skipped).toBeUndefined();
    await queueOverrideDelete(t.db, 'q');
  });

  it('replace_pending cancels the key’s pending tasks and leaves a running one be', async () => {
    const [running] = await taskInsertMany(t.db, [keyed('k', 'replace_pending', { concurrencyLimit: 1 })]);
    await claim();
    const [pending] = await taskInsertMany(t.db, [keyed('k', 'replace_pending')]);
    expect(await status(pending!.task.id)).toBe('pending');
    const [newest] = await taskInsertMany(t.db, [keyed('k', 'replace_pending')]);
    expect(await status(running!.task.id)).toBe('leased');
    expect(await status(pending!.task.id)).toBe('cancelled');
    expect(await status(newest!.task.id)).toBe('pending');
    // The newest waits its turn: the key's one slot is held.
    expect(await claim()).toEqual([]);
  });

  it('cancel_in_progress ends a leased task at once: its slot frees, its answer and its calls find no lease', async () => {
    const [a] = await taskInsertMany(t.db, [keyed('k', 'cancel_in_progress', { concurrencyLimit: 1 })]);
    const [leased] = (await claim()) as [LeasedTask];
    const [child] = await taskInsertMany(t.db, [keyed(null, 'queue', { parentId: a!.task.id })]);
    const [b] = await taskInsertMany(t.db, [keyed('k', 'cancel_in_progress')]);
    expect(b!.endedLeases).toEqual([{ id: a!.task.id, queue: 'q', key: 'k', leaseId: leased.lease.id }]);
    const gone = (await taskGet(t.db, a!.task.id))!;
    expect(gone).toMatchObject({ status: 'cancelled', lease: null });
    expect(gone.lastError).toMatch(/newer task of its concurrency key/);
    expect(await status(child!.task.id)).toBe('cancelled');
    // The new task is claimed now, not when the lease would have run out.
    const [next] = await claim();
    expect(next?.id).toBe(b!.task.id);
    // The push's answer changes nothing, and is not a success; nor does the holder's heartbeat.
    const held = await leaseSettleMany(t.db, [leaseEnding(leased, succeeded(200, 'done'), 5)]);
    expect(held.size).toBe(0);
    expect(await status(a!.task.id)).toBe('cancelled');
    expect((await leaseHeartbeat(t.db, a!.task.id, leased.lease.id, 10_000, 60_000)).ok).toBe(false);
    const attempts = await t.db.query<{ outcome: string }>('select outcome from sluice.all_attempts where task_id = $1', [a!.task.id]);
    expect(attempts.map((r) => r.outcome)).toEqual(['cancelled']);
  });
});
