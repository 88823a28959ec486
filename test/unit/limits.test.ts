import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { resolveKeyLimit, resolveKeyRate, resolveQueueLimits, room } from '../../src/core/limits.ts';
import { scenario } from '../helpers/claim-arbitraries.ts';
import { afterResume, holders, type ModelState, planClaim } from '../helpers/claim-model.ts';

describe('resolveQueueLimits', () => {
  it('takes each field from the override, else the environment, else the default', () => {
    const rate = { limit: 10, period_ms: 1_000 };
    const r = resolveQueueLimits(
      { concurrency: 5, key_concurrency: 2, paused: true, key_rate: rate, adaptive: true },
      { concurrency: 9, paused: false, pull: true },
    );
    expect(r).toEqual({
      concurrency: { value: 9, source: 'override' },
      keyConcurrency: { value: 2, source: 'env' },
      priority: { value: 0, source: 'default' },
      paused: { value: false, source: 'override' },
      rate: { value: null, source: 'default' },
      keyRate: { value: rate, source: 'env' },
      adaptive: { value: true, source: 'env' },
      adaptiveMin: { value: 1, source: 'default' },
      pull: { value: true, source: 'override' },
      keyStrategy: { value: 'queue', source: 'default' },
    });
    expect(resolveQueueLimits(undefined, null).adaptive).toEqual({ value: false, source: 'default' });
    expect(resolveQueueLimits(undefined, null).pull).toEqual({ value: false, source: 'default' });
  });
});

describe('resolveKeyRate', () => {
  const queueDefault = { value: { limit: 3, period_ms: 1_000 }, source: 'env' } as const;
  it('prefers the first task’s rate, then the queue key_rate; keyless has none', () => {
    const task = { limit: 1, period_ms: 60_000 };
    expect(resolveKeyRate('k', task, queueDefault)).toEqual({ value: task, source: 'task' });
    expect(resolveKeyRate('k', null, queueDefault)).toEqual(queueDefault);
    expect(resolveKeyRate(null, task, queueDefault)).toEqual({ value: null, source: 'default' });
  });
});

describe('resolveKeyLimit', () => {
  const queueDefault = { value: 3, source: 'env' } as const;
  it('prefers a key override, then the first task’s limit, then the queue default; keyless has none', () => {
    expect(resolveKeyLimit('k', 7, 2, queueDefault)).toEqual({ value: 7, source: 'override' });
    expect(resolveKeyLimit('k', null, 2, queueDefault)).toEqual({ value: 2, source: 'task' });
    expect(resolveKeyLimit('k', null, null, queueDefault)).toEqual(queueDefault);
    expect(resolveKeyLimit(null, 7, 2, queueDefault)).toEqual({ value: null, source: 'default' });
  });
});

describe('room', () => {
  it('is never negative, and unlimited without a limit', () => {
    fc.assert(
      fc.property(fc.option(fc.integer({ min: 1, max: 100 }), { nil: null }), fc.integer({ min: 0, max: 200 }), (limit, active) => {
        const r = room(limit, active);
        expect(r).toBeGreaterThanOrEqual(0);
        if (limit === null) expect(r).toBe(Number.POSITIVE_INFINITY);
        else expect(r).toBe(Math.max(0, limit - active));
      }),
    );
  });
});

/**
 * Slots held per level after claiming `ids` from `state` (resumed already): leases everywhere,
 * and waiting tasks at their queue and key unless lent.
 */
function countsAfter(state: ModelState, ids: number[]) {
  const claimed = new Set(ids);
  const byQueue = new Map<string, number>();
  const byKey = new Map<string, number>();
  for (const t of state.tasks) {
    const lane = t.key === null ? null : `${t.queue}/${t.key}`;
    if (claimed.has(t.id) || holders(state, t.queue).includes(t)) byQueue.set(t.queue, (byQueue.get(t.queue) ?? 0) + 1);
    if (lane !== null && (claimed.has(t.id) || holders(state, t.queue, t.key).includes(t))) byKey.set(lane, (byKey.get(lane) ?? 0) + 1);
  }
  const cluster = state.tasks.filter((t) => t.status === 'leased' || claimed.has(t.id)).length;
  // Grants inside their period after the pass: those before it, and one per level per claim.
  const grants = new Map(Object.entries(state.grants));
  const grant = (at: string) => grants.set(at, (grants.get(at) ?? 0) + 1);
  for (const t of state.tasks.filter((x) => claimed.has(x.id))) {
    grant(`${t.queue}/*`);
    if (t.key !== null) grant(`${t.queue}/k:${t.key}`);
  }
  return { cluster, byQueue, byKey, grants };
}

function limitsOf(state: ModelState, queue: string, key: string | null) {
  const q = resolveQueueLimits(state.env[queue], state.overrides[queue] ?? null);
  const lane = state.lanes.find((l) => l.queue === queue && l.key === key);
  const k = resolveKeyLimit(key, state.keyOverrides[queue]?.[key ?? ''] ?? null, lane?.taskLimit ?? null, q.keyConcurrency);
  const keyRate = resolveKeyRate(key, null, q.keyRate).value;
  return { queue: q.concurrency.value, key: k.value, paused: q.paused.value, rate: q.rate.value, keyRate };
}

/** Whether a rate at `at` (`queue/*`, `queue/k:key`) has no room left with `grants`. */
function rateSpent(rate: { limit: number } | null, grants: Map<string, number>, at: string): boolean {
  return rate !== null && (grants.get(at) ?? 0) >= rate.limit;
}

describe('a claim pass (the model of sluice.claim)', () => {
  it('never claims past a limit it was under, and claims only due pending tasks, at most max', () => {
    fc.assert(
      fc.property(scenario, ({ state: before, max }) => {
        const ids = planClaim(before, max);
        const state = afterResume(before);
        expect(new Set(ids).size).toBe(ids.length);
        expect(ids.length).toBeLessThanOrEqual(max);
        const after = countsAfter(state, ids);
        for (const id of ids) {
          const t = state.tasks.find((x) => x.id === id)!;
          expect(t.status).toBe('pending');
          expect(t.runAt).toBeLessThanOrEqual(state.now);
          const lim = limitsOf(state, t.queue, t.key);
          expect(lim.paused).toBe(false);
          if (lim.queue !== null) expect(after.byQueue.get(t.queue)!).toBeLessThanOrEqual(lim.queue);
          if (lim.key !== null) expect(after.byKey.get(`${t.queue}/${t.key}`)!).toBeLessThanOrEqual(lim.key);
          if (lim.rate !== null) expect(after.grants.get(`${t.queue}/*`)!).toBeLessThanOrEqual(lim.rate.limit);
          if (lim.keyRate !== null) expect(after.grants.get(`${t.queue}/k:${t.key}`)!).toBeLessThanOrEqual(lim.keyRate.limit);
        }
        if (state.clusterCap !== null && ids.length > 0) expect(after.cluster).toBeLessThanOrEqual(state.clusterCap);
      }),
      { numRuns: 2_000 },
    );
  });

  it('is work-conserving: a task left unclaimed is blocked by a limit or a rate, by max, or is not due', () => {
    fc.assert(
      fc.property(scenario, ({ state: before, max }) => {
        const ids = planClaim(before, max);
        const state = afterResume(before);
        const after = countsAfter(state, ids);
        if (ids.length === max) return;
        if (state.clusterCap !== null && after.cluster >= state.clusterCap) return;
        const claimed = new Set(ids);
        for (const t of state.tasks) {
          if (t.status !== 'pending' || claimed.has(t.id) || t.runAt > state.now) continue;
          const lim = limitsOf(state, t.queue, t.key);
          const blocked =
            lim.paused ||
            (lim.queue !== null && (after.byQueue.get(t.queue) ?? 0) >= lim.queue) ||
            (lim.key !== null && (after.byKey.get(`${t.queue}/${t.key}`) ?? 0) >= lim.key) ||
            rateSpent(lim.rate, after.grants, `${t.queue}/*`) ||
            rateSpent(lim.keyRate, after.grants, `${t.queue}/k:${t.key}`);
          expect(blocked, `task ${t.id} (${t.queue}/${t.key}) was claimable`).toBe(true);
        }
      }),
      { numRuns: 2_000 },
    );
  });

  it('serves lanes of equal priority round-robin: no lane gets a second task before every lane with room got one', () => {
    fc.assert(
      fc.property(scenario, ({ state: before, max }) => {
        const ids = planClaim(before, max);
        const state = afterResume(before);
        const claimed = ids.map((id) => state.tasks.find((t) => t.id === id)!);
        for (const queue of new Set(claimed.map((t) => t.queue))) {
          const inQueue = claimed.filter((t) => t.queue === queue);
          const minPriority = Math.min(...inQueue.map((t) => t.priority));
          const top = inQueue.filter((t) => t.priority === minPriority);
          const perLane = new Map<string, number>();
          for (const t of top) perLane.set(String(t.key), (perLane.get(String(t.key)) ?? 0) + 1);
          // Lanes that had a ready task of that priority and room, but got nothing:
          const starved = state.tasks.some((t) => {
            if (t.queue !== queue || t.status !== 'pending' || t.priority !== minPriority || t.runAt > state.now) return false;
            if (perLane.has(String(t.key))) return false;
            const lim = limitsOf(state, queue, t.key);
            const active = holders(state, queue, t.key).length;
            const grants = new Map(Object.entries(state.grants));
            if (rateSpent(lim.keyRate, grants, `${queue}/k:${t.key}`)) return false;
            return lim.key === null || active < lim.key;
          });
          if (starved) expect(Math.max(...perLane.values())).toBe(1);
        }
      }),
      { numRuns: 2_000 },
    );
  });
});
