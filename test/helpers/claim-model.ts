/**
 * A reference model of one claim pass (the specification of `sluice.claim` in
 * migrations/functions/claim.sql), in plain TypeScript over an in-memory state: concurrency
 * limits at every level, rate limits (a queue's `rate`, its keys' `key_rate`, counted by the
 * grants inside their period), and waits: a task waiting for its children holds its queue's and
 * its key's slots unless it lent them to a child, never a cluster slot, and is pending again once
 * its children have finished. Property tests check the model against the limits; db tests check
 * the SQL against the model.
 */
import { type QueueLimitSettings, resolveKeyLimit, resolveKeyRate, resolveQueueLimits, room } from '../../src/core/limits.ts';

export interface ModelTask {
  id: number;
  queue: string;
  key: string | null;
  priority: number;
  runAt: number;
  status: 'pending' | 'leased' | 'waiting';
  /** A waiting task's: the slots it lent to its children, and whether any child is unfinished. */
  wait?: { lentQueue: boolean; lentKey: boolean; childrenOpen: boolean };
}

export interface ModelLane {
  /** The lane row's id: ties in the round-robin order break by it. */
  id: number;
  queue: string;
  key: string | null;
  served: number;
  taskLimit: number | null;
}

export interface ModelState {
  tasks: ModelTask[];
  lanes: ModelLane[];
  env: Record<string, QueueLimitSettings>;
  overrides: Record<string, QueueLimitSettings>;
  keyOverrides: Record<string, Record<string, number>>;
  /** Rate grants still inside their period, by `queue/lane` (`*` for the queue's own rate, `k:<key>` for a key's). */
  grants: Record<string, number>;
  clusterCap: number | null;
  now: number;
}

const cmp = (...pairs: Array<[number, number]>) => {
  for (const [a, b] of pairs) if (a !== b) return a - b;
  return 0;
};

/**
 * The state as a pass sees it after its first step: waiting tasks whose children have all
 * finished are pending again, their due time kept.
 */
export function afterResume(state: ModelState): ModelState {
  const tasks = state.tasks.map((t): ModelTask => {
    if (t.status !== 'waiting' || t.wait?.childrenOpen) return t;
    const { wait: _, ...rest } = t;
    return { ...rest, status: 'pending' };
  });
  return { ...state, tasks };
}

/** Tasks holding a slot of their queue (`key` undefined) or of their queue's lane `key`: leased, or waiting and not lent. */
export function holders(state: ModelState, queue: string, key?: string | null): ModelTask[] {
  return state.tasks.filter(
    (t) =>
      t.queue === queue &&
      (key === undefined || t.key === key) &&
      (t.status === 'leased' || (t.status === 'waiting' && !(key === undefined ? t.wait?.lentQueue : t.wait?.lentKey))),
  );
}

/** The ids one pass of at most `max` claims, in rank order. */
export function planClaim(before: ModelState, max: number): number[] {
  const state = afterResume(before);
  // Only leases hold cluster slots.
  const leased = state.tasks.filter((t) => t.status === 'leased');
  const pending = state.tasks.filter((t) => t.status === 'pending');
  const clusterBudget = Math.max(0, Math.min(max, state.clusterCap === null ? max : state.clusterCap - leased.length));

  interface Candidate {
    task: ModelTask;
    lane: ModelLane;
    place: number;
    queuePriority: number;
  }
  const inQueueBudget: Candidate[] = [];
  const queues = [...new Set(pending.map((t) => t.queue))].sort();
  for (const queue of queues) {
    const limits = resolveQueueLimits(state.env[queue], state.overrides[queue] ?? null);
    if (limits.paused.value) continue;
    const queueActive = holders(state, queue).length;
    // A rate cuts the budget as a limit does: by the grants still inside its period.
    const rateRoom = (rate: { limit: number } | null, lane: string) =>
      rate === null ? max : rate.limit - (state.grants[`${queue}/${lane}`] ?? 0);
    const budget = Math.min(
      clusterBudget,
      limits.concurrency.value === null ? max : limits.concurrency.value - queueActive,
      rateRoom(limits.rate.value, '*'),
    );
    if (budget <= 0) continue;
    const lanes = state.lanes
      .filter((l) => l.queue === queue)
      .map((lane) => {
        const own = pending.filter((t) => t.queue === queue && t.key === lane.key);
        const limit = resolveKeyLimit(
          lane.key,
          state.keyOverrides[queue]?.[lane.key ?? ''] ?? null,
          lane.taskLimit,
          limits.keyConcurrency,
        ).value;
        const active = holders(state, queue, lane.key).length;
        const keyRate = resolveKeyRate(lane.key, null, limits.keyRate).value;
        const keyRateRoom = rateRoom(keyRate, lane.key === null ? '' : `k:${lane.key}`);
        const due = own.filter((t) => t.runAt <= state.now);
        return {
          lane,
          own,
          // The best priority among the lane's *due* tasks: a delayed task ranks its lane only once due.
          headPriority: Math.min(...due.map((t) => t.priority)),
          hasDue: due.length > 0,
          room: Math.min(limit === null ? max : limit - active, keyRateRoom),
          limited: room(limit, active) === 0 || keyRateRoom <= 0,
        };
      })
      .filter((l) => l.hasDue && !l.limited)
      .sort((a, b) => cmp([a.headPriority, b.headPriority], [a.lane.served, b.lane.served], [a.lane.id, b.lane.id]))
      .slice(0, budget);
    const candidates: Candidate[] = [];
    for (const l of lanes) {
      const ready = l.own
        .filter((t) => t.runAt <= state.now)
        .sort((a, b) => cmp([a.priority, b.priority], [a.runAt, b.runAt], [a.id, b.id]))
        .slice(0, Math.min(l.room, budget));
      ready.forEach((task, i) => {
        candidates.push({ task, lane: l.lane, place: i + 1, queuePriority: limits.priority.value });
      });
    }
    candidates.sort((a, b) =>
      cmp([a.task.priority, b.task.priority], [a.place, b.place], [a.lane.served, b.lane.served], [a.lane.id, b.lane.id]),
    );
    inQueueBudget.push(...candidates.slice(0, budget));
  }
  inQueueBudget.sort((a, b) =>
    cmp(
      [a.queuePriority, b.queuePriority],
      [a.task.priority, b.task.priority],
      [a.place, b.place],
      [a.lane.served, b.lane.served],
      [a.lane.id, b.lane.id],
    ),
  );
  return inQueueBudget.slice(0, clusterBudget).map((c) => c.task.id);
}
