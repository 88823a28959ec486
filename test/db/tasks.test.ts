import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { taskCancel, taskGet, taskList } from '../../src/db/tasks.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { newTask } from '../helpers/tasks.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(() => t.drop());
beforeEach(() => t.db.query('truncate sluice.tasks, sluice.finished, sluice.attempts cascade'));

describe('taskInsertMany', () => {
  it('inserts in input order and returns every field as stored', async () => {
    const results = await taskInsertMany(t.db, [newTask({ body: '"a"' }), newTask({ body: '"b"', priority: -5, concurrencyKey: 'k' })]);
    expect(results.map((r) => [r.task.body, r.deduplicated])).toEqual([
      ['"a"', false],
      ['"b"', false],
    ]);
    expect(Number(results[1]!.task.id)).toBeGreaterThan(Number(results[0]!.task.id));
    expect(results[1]!.task).toMatchObject({ status: 'pending', priority: -5, concurrencyKey: 'k', attempts: 0, lease: null });
  });

  it('computes run_at and expires_at from the database clock', async () => {
    const [r] = await taskInsertMany(t.db, [newTask({ delayMs: 60_000, ttlMs: 120_000 })]);
    const { task } = r!;
    expect(task.runAt.getTime() - task.createdAt.getTime()).toBe(60_000);
    expect(task.expiresAt!.getTime() - task.createdAt.getTime()).toBe(120_000);
  });

  it('returns the unfinished task for a repeated dedup key, within a batch and across calls', async () => {
    const first = await taskInsertMany(t.db, [
      newTask({ dedupKey: 'order-1' }),
      newTask({ dedupKey: 'order-1' }),
      newTask({ dedupKey: 'order-1', queue: 'other' }),
    ]);
    expect(first.map((r) => r.deduplicated)).toEqual([false, true, false]);
    expect(first[1]!.task.id).toBe(first[0]!.task.id);
    const again = await taskInsertMany(t.db, [newTask({ dedupKey: 'order-1' })]);
    expect(again[0]).toMatchObject({ deduplicated: true, task: { id: first[0]!.task.id } });
  });

  it('deduplicates concurrent enqueues of one key to one task', async () => {
    const results = await Promise.all(Array.from({ length: 10 }, () => taskInsertMany(t.db, [newTask({ dedupKey: 'race' })])));
    const ids = new Set(results.map((r) => r[0]!.task.id));
    expect(ids.size).toBe(1);
    expect(results.filter((r) => !r[0]!.deduplicated)).toHaveLength(1);
  });

  it('accepts the dedup key again once the task has finished', async () => {
    const [r] = await taskInsertMany(t.db, [newTask({ dedupKey: 'once' })]);
    await taskCancel(t.db, r!.task.id);
    const [again] = await taskInsertMany(t.db, [newTask({ dedupKey: 'once' })]);
    expect(again).toMatchObject({ deduplicated: false });
    expect(again!.task.id).not.toBe(r!.task.id);
  });

  it('writes nothing when one row of a batch violates a constraint', async () => {
    await expect(taskInsertMany(t.db, [newTask(), newTask({ timeoutMs: 90_000 })])).rejects.toThrow(/tasks_timeout_within_lease/);
    expect(await taskList(t.db, { limit: 10 })).toEqual([]);
  });
});

describe('taskList', () => {
  it('pages newest first and filters by queue, status and key', async () => {
    await taskInsertMany(t.db, [
      newTask({ queue: 'a' }),
      newTask({ queue: 'b', concurrencyKey: 'x' }),
      newTask({ queue: 'a' }),
      newTask({ queue: 'a' }),
    ]);
    const page1 = await taskList(t.db, { queue: 'a', limit: 2 });
    const page2 = await taskList(t.db, { queue: 'a', limit: 2, beforeId: page1.at(-1)!.id });
    expect([...page1, ...page2].map((x) => x.queue)).toEqual(['a', 'a', 'a']);
    expect(Number(page1[0]!.id)).toBeGreaterThan(Number(page1[1]!.id));
    expect(await taskList(t.db, { concurrencyKey: 'x', limit: 10 })).toHaveLength(1);
    expect(await taskList(t.db, { status: 'succeeded', limit: 10 })).toEqual([]);
  });
});

describe('taskCancel', () => {
  it('cancels a pending task, requests cancellation of a leased one, and refuses a finished one', async () => {
    const [a, b] = await taskInsertMany(t.db, [newTask(), newTask()]);
    expect(await taskCancel(t.db, a!.task.id)).toMatchObject({ status: 'cancelled' });
    await t.db.query(`select * from sluice.claim(1, null, '{}')`);
    const leased = await taskCancel(t.db, b!.task.id);
    expect(leased.status).toBe('leased');
    expect(leased.cancelRequestedAt).toBeInstanceOf(Date);
    await expect(taskCancel(t.db, a!.task.id)).rejects.toMatchObject({ status: 409, code: 'already_finished' });
    await expect(taskCancel(t.db, '999999')).rejects.toMatchObject({ status: 404 });
    expect(await taskGet(t.db, '999999')).toBeNull();
  });
});
