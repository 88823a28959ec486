/**
 * The fault matrix's checker can fail: histories with a lost item, an unexplained duplicate,
 * a limit exceeded while leases were live, a lease left at rest, a stale lease call accepted
 * are each called out; the same histories with the fault to explain them, or with the
 * overlap only after a lease expired, pass.
 */
import { describe, expect, it } from 'vitest';
import { checkHistory, type History, type PushRecord } from './matrix/checker.ts';

const LIMITS = { cluster: 2, queues: { q: { concurrency: 2, key_concurrency: 1 } } };

function push(taskId: string, at: number, extra: Partial<PushRecord> = {}): PushRecord {
  return {
    taskId,
    webhookId: taskId,
    item: Number(taskId),
    queue: 'q',
    key: `k${taskId}`,
    attempt: 1,
    leaseId: `lease-${taskId}-${at}`,
    behaviour: 'ok',
    receivedAt: at,
    endedAt: at + 10,
    leaseUntil: at + 3_000,
    done: true,
    ...extra,
  };
}

function history(pushes: PushRecord[], extra: Partial<History> = {}): History {
  const ids = [...new Set(pushes.map((p) => p.taskId))];
  return {
    acked: new Set(ids.map(Number)),
    resent: new Set(),
    pushes,
    calls: [],
    tasks: ids.map((id) => ({ id, item: Number(id), status: 'succeeded' })),
    abandonedAttempts: [],
    leasedAtRest: 0,
    fault: null,
    limits: LIMITS,
    ...extra,
  };
}

describe('the fault checker', () => {
  it('passes a clean history', () => {
    const v = checkHistory(history([push('1', 0), push('2', 100)]));
    expect(v).toMatchObject({ ok: true, lost: 0, duplicates: 0, overLimit: 0 });
  });

  it('counts an acknowledged item the endpoint never finished as lost', () => {
    const v = checkHistory(history([push('1', 0, { done: false })], { fault: { startMs: 0, endMs: 0 } }));
    expect(v).toMatchObject({ ok: false, lost: 1 });
  });

  it('counts a task the database has as succeeded, with no finished push, as lost', () => {
    const v = checkHistory(
      history([push('1', 0)], {
        acked: new Set([1, 2]),
        tasks: [
          { id: '1', item: 1, status: 'succeeded' },
          { id: '2', item: 2, status: 'succeeded' },
        ],
      }),
    );
    expect(v).toMatchObject({ ok: false, lost: 1 });
  });

  it('explains a duplicate only by a fault whose window met the first push, or by the endpoint letting it go', () => {
    const twice = [push('1', 0), push('1', 5_000, { attempt: 2 })];
    expect(checkHistory(history(twice))).toMatchObject({ ok: false, duplicates: 1, explained: 0 });
    expect(checkHistory(history(twice, { fault: { startMs: 1_000, endMs: 1_000 } }))).toMatchObject({ ok: true, explained: 1 });
    expect(checkHistory(history(twice, { fault: { startMs: 4_000, endMs: 4_500 } }))).toMatchObject({ ok: false, explained: 0 });
    const hung = [push('1', 0, { behaviour: 'hang', done: false, endedAt: 4_000 }), push('1', 3_100, { attempt: 2 })];
    expect(checkHistory(history(hung))).toMatchObject({ ok: true, duplicates: 1, explained: 1 });
  });

  it('calls out a push whose webhook-id is not its task id', () => {
    expect(checkHistory(history([push('1', 0, { webhookId: '2' })]))).toMatchObject({ ok: false, badWebhookIds: 1 });
  });

  it('counts pushes in flight while their leases are live, per level, and no longer once a lease expired', () => {
    // Key k1 has a limit of 1: two overlapping pushes of it exceed it.
    const overlap = [push('1', 0, { endedAt: 500 }), push('2', 100, { key: 'k1', endedAt: 600 })];
    const v = checkHistory(history(overlap));
    expect(v.peaks.find((p) => p.level === 'key q/*')).toEqual({ level: 'key q/*', peak: 2, limit: 1 });
    expect(v.ok).toBe(false);
    // A handler still running after its lease expired holds no slot.
    const expired = [push('1', 0, { endedAt: 5_000, leaseUntil: 3_000 }), push('2', 3_000, { key: 'k1' })];
    expect(checkHistory(history(expired))).toMatchObject({ ok: true, overLimit: 0 });
  });

  it('calls out a lease left at rest, and a stale lease call that was accepted', () => {
    expect(checkHistory(history([push('1', 0)], { leasedAtRest: 1 })).ok).toBe(false);
    const stale = { leaseId: 'x', taskId: '1', call: 'complete' as const, stale: true, repeated: false };
    expect(checkHistory(history([push('1', 0)], { calls: [{ ...stale, status: 409 }] }))).toMatchObject({ ok: true, staleCalls: 1 });
    expect(checkHistory(history([push('1', 0)], { calls: [{ ...stale, status: 200 }] }))).toMatchObject({ ok: false, staleAccepted: 1 });
    const twice = { ...stale, stale: false, status: 200 };
    expect(checkHistory(history([push('1', 0)], { calls: [twice, twice] }))).toMatchObject({ ok: false, staleAccepted: 1 });
  });
});
