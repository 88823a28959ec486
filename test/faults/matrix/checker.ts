/**
 * The total-queue check of a fault run, in the style of Jepsen's `total-queue` checker, from
 * the endpoint's log and the database at rest. Pure: a history in, a verdict out.
 *
 * - lost: an item the producer was told was enqueued whose work the endpoint never finished,
 *   or whose task is not `succeeded` at rest;
 * - duplicates: pushes after a task's first; each is explained when the push before it was
 *   cut by the fault (its lease was live during the fault's window), or the endpoint itself
 *   let it go (hung past the timeout, stopped heartbeating); the same task id and
 *   `webhook-id` on every push is checked too;
 * - in flight: the most pushes the endpoint was working on at once while their leases were
 *   live, per level (cluster, queue, key), against each limit;
 * - stale lease calls: calls for a lease the endpoint knew was over that were accepted;
 * - recovery: from the fault's end to the first push after it; from its start until the rate of
 *   finished pushes is back to half what it was; when the tasks it disturbed were pushed again.
 */

/** How the endpoint handled one push (set per push by the fault's script). */
export type Behaviour =
  /** Answers 2xx after `ms`. */
  | { kind: 'ok'; ms: number }
  /** Answers 500 after `ms`: the attempt fails and is retried after its backoff. */
  | { kind: 'fail'; ms: number }
  /** Works `ms`, longer than the push timeout (the answer comes too late). */
  | { kind: 'hang'; ms: number }
  /** Keeps the lease (`Sluice-Ack: lease`), heartbeats every `heartbeatMs` while it works `ms`, then completes. */
  | { kind: 'lease'; ms: number; heartbeatMs: number }
  /** Keeps the lease, then vanishes: no heartbeat; after the expiry, a late heartbeat and complete. */
  | { kind: 'abandon' }
  /** Keeps the lease; duplicate and concurrent heartbeats and completes, then late ones. */
  | { kind: 'chaos'; ms: number };

export interface PushRecord {
  taskId: string;
  webhookId: string | null;
  item: number;
  queue: string;
  key: string;
  attempt: number;
  leaseId: string;
  behaviour: Behaviour['kind'];
  /** Wall-clock ms (sub-ms precision) when the request arrived. */
  receivedAt: number;
  /** When the handler stopped working on it; `null` while it still works. */
  endedAt: number | null;
  /** Until when its lease was live as the endpoint knows it: the push's expiry, moved by heartbeats, ended by a lease call. */
  leaseUntil: number;
  /** The endpoint finished the work and Sluice was told (a 2xx it wrote, or a complete it accepted). */
  done: boolean;
}

export interface LeaseCallRecord {
  leaseId: string;
  taskId: string;
  call: 'heartbeat' | 'complete' | 'fail';
  /** Sent for a lease the endpoint knew was over (completed, or past its expiry). */
  stale: boolean;
  status: number;
  /** A 200 that says the call repeated one already accepted (`repeated: true`). */
  repeated: boolean;
}

export interface FaultWindow {
  startMs: number;
  endMs: number;
  /** Tasks the fault is known to have disturbed without a push before it (claimed, never pushed). */
  affected?: readonly string[];
}

export interface LevelLimits {
  cluster: number;
  queues: Readonly<Record<string, { concurrency?: number; key_concurrency?: number }>>;
}

export interface History {
  /** Items the producer was told were enqueued. */
  acked: ReadonlySet<number>;
  /** Items whose enqueue was sent more than once (an answer lost to a fault). */
  resent: ReadonlySet<number>;
  pushes: readonly PushRecord[];
  calls: readonly LeaseCallRecord[];
  /** Every task at rest. */
  tasks: readonly { id: string; item: number; status: string }[];
  /** Attempt rows of leases that were abandoned (their outcome must not be a success). */
  abandonedAttempts: readonly { leaseId: string; outcome: string }[];
  leasedAtRest: number;
  fault: FaultWindow | null;
  limits: LevelLimits;
}

export interface Peak {
  level: string;
  peak: number;
  limit: number;
}

export interface Verdict {
  tasks: number;
  lost: number;
  /** Tasks the database has that the producer never got acknowledged, or pushes of no task. */
  unexpected: number;
  duplicates: number;
  explained: number;
  /** Items enqueued as two tasks (an enqueue repeated after its answer was lost). */
  enqueueDuplicates: number;
  /** Pushes whose `webhook-id` was not the task id. */
  badWebhookIds: number;
  peaks: Peak[];
  overLimit: number;
  leasedAtRest: number;
  staleCalls: number;
  staleAccepted: number;
  /** Abandoned leases whose attempt was recorded as anything but an expiry. */
  staleChanged: number;
  recovery: Recovery;
  ok: boolean;
  problems: string[];
}

/** Slack before a push's arrival in which its claim (and so its lease) already existed. */
const CLAIM_SLACK_MS = 1_000;

export function checkHistory(h: History): Verdict {
  const problems: string[] = [];
  const byTask = new Map<string, PushRecord[]>();
  for (const p of [...h.pushes].sort((a, b) => a.receivedAt - b.receivedAt)) {
    const list = byTask.get(p.taskId) ?? [];
    list.push(p);
    byTask.set(p.taskId, list);
  }

  // Lost: acknowledged, and not both finished by the endpoint and succeeded in the database.
  const taskOf = new Map(h.tasks.map((t) => [t.id, t]));
  const doneItems = new Set<number>();
  for (const [taskId, pushes] of byTask) {
    const task = taskOf.get(taskId);
    if (task?.status === 'succeeded' && pushes.some((p) => p.done)) doneItems.add(task.item);
  }
  const lostItems = [...h.acked].filter((item) => !doneItems.has(item));
  if (lostItems.length > 0) problems.push(`lost items ${lostItems.slice(0, 10).join(', ')}`);

  const unexpected =
    h.tasks.filter((t) => !h.acked.has(t.item) && !h.resent.has(t.item)).length + [...byTask.keys()].filter((id) => !taskOf.has(id)).length;
  if (unexpected > 0) problems.push(`${unexpected} unexpected tasks or pushes`);

  const tasksPerItem = new Map<number, number>();
  for (const t of h.tasks) tasksPerItem.set(t.item, (tasksPerItem.get(t.item) ?? 0) + 1);
  const enqueueDuplicates = [...tasksPerItem.values()].filter((n) => n > 1).length;

  // Duplicates, each explained by the fault or by the endpoint's own doing.
  const fault = h.fault;
  const cutByFault = (p: PushRecord) =>
    fault !== null && p.receivedAt - CLAIM_SLACK_MS <= fault.endMs && Math.max(p.leaseUntil, p.endedAt ?? 0) >= fault.startMs;
  const letGo = (p: PushRecord) => p.behaviour !== 'ok' && p.behaviour !== 'lease' && p.behaviour !== 'chaos';
  let duplicates = 0;
  let explained = 0;
  for (const pushes of byTask.values()) {
    for (let i = 1; i < pushes.length; i++) {
      duplicates++;
      const before = pushes[i - 1]!;
      if (cutByFault(before) || letGo(before)) explained++;
    }
  }
  if (explained < duplicates) problems.push(`${duplicates - explained} duplicates not explained by the fault`);

  const badWebhookIds = h.pushes.filter((p) => p.webhookId !== p.taskId).length;
  if (badWebhookIds > 0) problems.push(`${badWebhookIds} pushes whose webhook-id is not the task id`);

  const peaks = inFlightPeaks(h.pushes, h.limits);
  const overLimit = peaks.filter((p) => p.peak > p.limit).length;
  for (const p of peaks) if (p.peak > p.limit) problems.push(`in flight ${p.peak} > ${p.limit} at ${p.level}`);

  if (h.leasedAtRest > 0) problems.push(`${h.leasedAtRest} leased rows at rest`);

  const stale = h.calls.filter((c) => c.stale);
  const staleAccepted = stale.filter((c) => c.status >= 200 && c.status < 300 && !c.repeated).length;
  // Concurrent completes of one lease: at most one is accepted as new.
  const firstCompletes = new Map<string, number>();
  for (const c of h.calls) {
    if (c.call === 'complete' && !c.stale && c.status === 200 && !c.repeated) {
      firstCompletes.set(c.leaseId, (firstCompletes.get(c.leaseId) ?? 0) + 1);
    }
  }
  const doubleAccepted = [...firstCompletes.values()].filter((n) => n > 1).length;
  if (staleAccepted + doubleAccepted > 0) problems.push(`${staleAccepted + doubleAccepted} stale or repeated lease calls accepted as new`);
  const staleChanged = h.abandonedAttempts.filter((a) => a.outcome === 'succeeded').length;
  if (staleChanged > 0) problems.push(`${staleChanged} abandoned leases ended as succeeded by a late call`);

  const verdict: Verdict = {
    tasks: h.acked.size,
    lost: lostItems.length,
    unexpected,
    duplicates,
    explained,
    enqueueDuplicates,
    badWebhookIds,
    peaks,
    overLimit,
    leasedAtRest: h.leasedAtRest,
    staleCalls: stale.length,
    staleAccepted: staleAccepted + doubleAccepted,
    staleChanged,
    recovery: recovery(byTask, fault, cutByFault),
    ok: problems.length === 0,
    problems,
  };
  return verdict;
}

/**
 * The most pushes in flight at once per level, counting each push from its arrival until its
 * handler ended or its lease did (a handler still running after its lease expired no longer
 * holds a slot: Sluice may push the task again, as docs/DESIGN.md §4 says).
 */
export function inFlightPeaks(pushes: readonly PushRecord[], limits: LevelLimits): Peak[] {
  const events: Array<{ at: number; delta: 1 | -1; levels: string[] }> = [];
  for (const p of pushes) {
    const end = Math.min(p.endedAt ?? Number.POSITIVE_INFINITY, p.leaseUntil);
    if (end <= p.receivedAt) continue;
    const levels = ['cluster'];
    const q = limits.queues[p.queue];
    if (q?.concurrency !== undefined) levels.push(`queue ${p.queue}`);
    if (q?.key_concurrency !== undefined) levels.push(`key ${p.queue}/${p.key}`);
    events.push({ at: p.receivedAt, delta: 1, levels }, { at: end, delta: -1, levels });
  }
  // At the same instant an end comes before a start: the slot was free by then.
  events.sort((a, b) => a.at - b.at || a.delta - b.delta);
  const open = new Map<string, number>();
  const peak = new Map<string, number>();
  for (const e of events) {
    for (const level of e.levels) {
      const n = (open.get(level) ?? 0) + e.delta;
      open.set(level, n);
      peak.set(level, Math.max(peak.get(level) ?? 0, n));
    }
  }
  const result: Peak[] = [{ level: 'cluster', peak: peak.get('cluster') ?? 0, limit: limits.cluster }];
  for (const [queue, q] of Object.entries(limits.queues)) {
    if (q.concurrency !== undefined) result.push({ level: `queue ${queue}`, peak: peak.get(`queue ${queue}`) ?? 0, limit: q.concurrency });
    if (q.key_concurrency !== undefined) {
      const keys = [...peak.entries()].filter(([level]) => level.startsWith(`key ${queue}/`));
      result.push({ level: `key ${queue}/*`, peak: Math.max(0, ...keys.map(([, n]) => n)), limit: q.key_concurrency });
    }
  }
  return result;
}

interface Recovery {
  /** From the fault's end to the first push after it that the endpoint finished. */
  resumedMs: number | null;
  /** From the fault's start until a second's finished pushes were back to half the rate of the 5 s before it (0: never below). */
  rateBackMs: number | null;
  /** From the fault's start to the first and the last next push of a task it disturbed (behind its lane's backlog: FIFO). */
  redelivered: { firstMs: number; lastMs: number; tasks: number } | null;
}

function recovery(byTask: Map<string, PushRecord[]>, fault: FaultWindow | null, cutByFault: (p: PushRecord) => boolean): Recovery {
  if (!fault) return { resumedMs: null, rateBackMs: null, redelivered: null };
  let firstAfter = Number.POSITIVE_INFINITY;
  const next: number[] = [];
  const finished: number[] = [];
  const affected = new Set(fault.affected ?? []);
  for (const [taskId, pushes] of byTask) {
    for (const p of pushes) {
      if (!p.done || p.endedAt === null) continue;
      finished.push(p.endedAt);
      if (p.receivedAt > fault.endMs) firstAfter = Math.min(firstAfter, p.receivedAt);
    }
    // A task the fault disturbed (claimed and never pushed, or pushed and cut) is recovered by
    // its next push.
    if (affected.has(taskId)) next.push(pushes[0]!.receivedAt);
    for (let i = 1; i < pushes.length; i++) if (cutByFault(pushes[i - 1]!)) next.push(pushes[i]!.receivedAt);
  }
  finished.sort((a, b) => a - b);
  const within = (from: number, to: number) => lowerBound(finished, to) - lowerBound(finished, from);
  const baseline = within(fault.startMs - 5_000, fault.startMs) / 5;
  let rateBackMs: number | null = null;
  // Nothing finished before the fault (tasks still waiting to come due): no rate to come back to.
  for (let t = fault.startMs; baseline >= 1 && t <= (finished.at(-1) ?? 0); t += 100) {
    if (within(t, t + 1_000) >= baseline / 2) {
      rateBackMs = t - fault.startMs;
      break;
    }
  }
  return {
    resumedMs: Number.isFinite(firstAfter) ? Math.max(0, firstAfter - fault.endMs) : null,
    rateBackMs,
    redelivered:
      next.length === 0
        ? null
        : { firstMs: Math.min(...next) - fault.startMs, lastMs: Math.max(...next) - fault.startMs, tasks: next.length },
  };
}

/** The index of the first element of sorted `xs` that is not below `x`. */
function lowerBound(xs: readonly number[], x: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
