/**
 * The lease state machine (docs/DESIGN.md §4), pure. A lease is granted by a claim and ends exactly
 * once: by the push's answer (core/outcome.ts), by a lease call, by an admin, or by expiry.
 *
 *   claim ──▶ leased ──2xx──────────────────────────────▶ succeeded
 *              │  ├──2xx + Sluice-Ack: lease ──▶ held ──heartbeat──▶ held (extended, up to a maximum)
 *              │  │                               ├──complete──────▶ succeeded
 *              │  │                               ├──fail─────────▶ pending (retry) | dead
 *              │  │                               ├──release──────▶ pending (no attempt used)
 *              │  │                               └──cancel seen───▶ cancelled (at a heartbeat)
 *              │  ├──failure / 429+Retry-After ───────▶ pending | dead
 *              │  └──timeout, connection lost ────────▶ held until expiry or a lease call (the handler may be running)
 *              └──expiry (no answer, no heartbeat) ──▶ pending (retry) | dead
 *
 * Every ending is a compare-and-set on the lease id (db/settle.ts, db/leases.ts): only the
 * holder of the current, unexpired lease changes anything. Expiry times are the database's.
 */
import { decide, giveBack, type Settlement } from './outcome.ts';
import type { Task } from './types.ts';

export type LeaseCall =
  | { kind: 'complete'; result: string | null }
  | { kind: 'fail'; error: string; retry: boolean; retryAfterMs: number | null }
  | { kind: 'release'; delayMs: number }
  /** A heartbeat found the task cancelled: the lease ends now and the task with it. */
  | { kind: 'cancelled' };

type LeaseTask = Pick<Task, 'attempts' | 'maxAttempts' | 'backoff' | 'deferrals'>;

/** How a lease call ends the lease. */
export function settleLeaseCall(task: LeaseTask, call: LeaseCall, nowMs: number, random: number): Settlement {
  switch (call.kind) {
    case 'complete':
      // No HTTP answer ends it, so no status is recorded (the push that kept the lease answered 2xx).
      return decide(task, { type: 'succeeded', result: call.result, status: null }, nowMs, random);
    case 'cancelled':
      // Pending only on paper: the settle sees the cancel asked for and ends the task as cancelled.
      return {
        status: 'pending',
        reason: 'cancelled',
        runAt: new Date(nowMs),
        attemptsDelta: 0,
        deferralsDelta: 0,
        error: 'cancelled: its holder was told so at its heartbeat',
        httpStatus: null,
      };
    case 'release':
      // Giving a task back costs no attempt, but counts as a deferral: it cannot go on forever.
      return giveBack(task, 'released', call.delayMs, 'released by the lease holder', null, nowMs, random);
    case 'fail': {
      const settlement = decide(task, { type: 'failed', retryable: call.retry, error: call.error, status: null }, nowMs, random);
      // The holder may say when to try again; the attempt is used all the same.
      if (settlement.status === 'pending' && call.retryAfterMs !== null) {
        return { ...settlement, runAt: new Date(nowMs + call.retryAfterMs) };
      }
      return settlement;
    }
  }
}

/** What is written in `last_error` while a push that went unanswered holds its slot. */
export function unansweredNote(attempt: number, error: string): string {
  return `attempt ${attempt}: ${error}; its slot is held until the lease expires`;
}

/**
 * The outcome of a lease that expired: an attempt that timed out. That includes a push that
 * timed out or lost its connection, whose lease (its slot) was held until now: what became of
 * that push (its note in `last_error`) is kept in the error.
 */
export function expiryOutcome(task: Pick<Task, 'attempts' | 'lastError'>, expiresAt: Date) {
  const prefix = `attempt ${task.attempts}: `;
  const push = task.lastError?.startsWith(prefix)
    ? `${task.lastError.slice(prefix.length).replace(/; its slot is held until the lease expires$/, '')}, then `
    : '';
  return {
    type: 'failed',
    retryable: true,
    error: `${push}lease expired at ${expiresAt.toISOString()} (no answer, heartbeat or lease call in time)`,
    status: null,
  } as const;
}
