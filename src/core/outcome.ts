/**
 * What a push's answer means (classification), and what Sluice does about it (decision).
 * Both pure: the clock and the random draw are arguments.
 */
import { backoffDelayMs } from './retry.ts';
import { storable, truncate } from './text.ts';
import { LIMITS, type Task } from './types.ts';

/** What one push attempt produced, as seen by the dispatcher. */
export type PushResult =
  | {
      kind: 'response';
      status: number;
      /** Lower-cased header names. */
      headers: Readonly<Record<string, string>>;
      body: string;
      durationMs: number;
    }
  | { kind: 'timeout'; durationMs: number }
  /** `sent`: the request may have reached the endpoint (false only when surely not: refused, no such host). */
  | { kind: 'network'; message: string; sent: boolean; durationMs: number }
  /** Sluice refused to send it (a target that is not allowed, say). */
  | { kind: 'refused'; message: string; durationMs: number };

export type Outcome =
  /** `status`: the HTTP answer's; `null` when a lease call, not an answer, ended it. */
  | { type: 'succeeded'; result: string | null; status: number | null }
  /** 2xx with `Sluice-Ack: lease`: the endpoint keeps the lease and will complete or fail it. */
  | { type: 'lease_kept'; status: number }
  /**
   * No answer in time, or the connection lost after the request may have arrived: the handler
   * may still be running (closing a connection does not stop it), so the lease, which is the
   * slot, is held until it expires or its holder ends it with the push's lease token.
   */
  | { type: 'unanswered'; error: string; cause: 'timeout' | 'connection lost' }
  | { type: 'deferred'; delayMs: number; status: number }
  | { type: 'failed'; retryable: boolean; error: string; status: number | null };

/** Classifies a push result per docs/DESIGN.md §3. */
export function classifyPush(result: PushResult, nowMs: number): Outcome {
  switch (result.kind) {
    case 'timeout':
      return { type: 'unanswered', error: `push timed out after ${result.durationMs} ms`, cause: 'timeout' };
    case 'network':
      if (result.sent) return { type: 'unanswered', error: `network error: ${result.message}`, cause: 'connection lost' };
      return { type: 'failed', retryable: true, error: `network error: ${result.message}`, status: null };
    case 'refused':
      return { type: 'failed', retryable: false, error: `push refused: ${result.message}`, status: null };
    case 'response':
      break;
  }
  const { status, headers, body } = result;
  if (status >= 200 && status < 300) {
    if (headers['sluice-ack']?.trim().toLowerCase() === 'lease') return { type: 'lease_kept', status };
    return { type: 'succeeded', result: body === '' ? null : body, status };
  }
  if (status === 429 || status === 503) {
    const delayMs = parseRetryAfter(headers['retry-after'], nowMs);
    if (delayMs !== null) return { type: 'deferred', delayMs: Math.min(delayMs, LIMITS.maxDeferralMs), status };
  }
  const retryable = headers['sluice-retry']?.trim().toLowerCase() !== 'false';
  const what = status >= 300 && status < 400 ? `redirect ${status} (redirects are not followed)` : `HTTP ${status}`;
  const detail = truncate(body.trim(), 500);
  return { type: 'failed', retryable, error: detail ? `${what}: ${detail}` : what, status };
}

/**
 * What an answer says of the endpoint's capacity, for its level (the key's, else the queue's):
 * `ok` (answered 2xx), `overload` (429 or 503 without Retry-After, or a refused connection),
 * `hold` (429 or 503 with Retry-After: the whole level waits until then). Only adaptive queues
 * learn from `ok` and `overload`; every queue is held. A push that went unanswered (a timeout,
 * a connection lost) keeps its lease, so no settle carries its signal: the recorder sends it
 * on its own (db/levels.ts).
 */
export type Signal = 'ok' | 'overload' | 'hold';

export function pushSignal(outcome: Outcome): Signal | null {
  switch (outcome.type) {
    case 'succeeded':
    case 'lease_kept':
      return 'ok';
    case 'deferred':
      return 'hold';
    case 'failed':
      if (outcome.status === 429 || outcome.status === 503) return 'overload';
      // Retryable with no status: the connection was refused before anything was sent.
      return outcome.status === null && outcome.retryable ? 'overload' : null;
    case 'unanswered':
      return null;
  }
}

/** `Retry-After` as delta-seconds or an HTTP date; `null` when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | null {
  if (value === undefined) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return null;
  return Math.max(0, at - nowMs);
}

/** How a lease ends: the new state of its task. */
export type Settlement =
  | { status: 'succeeded'; result: string | null; httpStatus: number | null }
  | {
      status: 'pending';
      /**
       * Why it waits: a failed attempt, a Retry-After deferral, or given back by its holder; or
       * `cancelled`, the end of a lease whose task was cancelled meanwhile (the settle, seeing
       * the cancel asked for, ends the task instead: db/settle.ts).
       */
      reason: 'retry' | 'deferred' | 'released' | 'cancelled';
      runAt: Date;
      /** -1 when the attempt is given back (a deferral), else 0. */
      attemptsDelta: -1 | 0;
      deferralsDelta: 0 | 1;
      error: string | null;
      httpStatus: number | null;
    }
  | { status: 'dead'; error: string; httpStatus: number | null };

type SettleInput = Pick<Task, 'attempts' | 'maxAttempts' | 'backoff' | 'deferrals'>;

/** The outcomes that end a lease now; the others leave it held (kept, or unanswered). */
export type EndingOutcome = Exclude<Outcome, { type: 'lease_kept' | 'unanswered' }>;

/**
 * Decides how a lease ends after an outcome. `task.attempts` already counts the attempt that
 * produced it (a claim counts the attempt it starts). A kept lease does not end here: the
 * endpoint ends it with a lease call (core/lease.ts).
 */
export function decide(task: SettleInput, outcome: EndingOutcome, nowMs: number, random: number): Settlement {
  if (outcome.type === 'succeeded') {
    const result = outcome.result === null ? null : storable(truncate(outcome.result, LIMITS.resultBytes));
    return { status: 'succeeded', result, httpStatus: outcome.status };
  }
  if (outcome.type === 'deferred') {
    return giveBack(
      task,
      'deferred',
      outcome.delayMs,
      `deferred by HTTP ${outcome.status} with Retry-After`,
      outcome.status,
      nowMs,
      random,
    );
  }
  const error = storable(truncate(outcome.error, LIMITS.errorChars));
  if (!outcome.retryable) return { status: 'dead', error, httpStatus: outcome.status };
  if (task.attempts >= task.maxAttempts) {
    return { status: 'dead', error: `${error} (attempt ${task.attempts} of ${task.maxAttempts})`, httpStatus: outcome.status };
  }
  return {
    status: 'pending',
    reason: 'retry',
    runAt: new Date(nowMs + backoffDelayMs(task.backoff, task.attempts, random)),
    attemptsDelta: 0,
    deferralsDelta: 0,
    error,
    httpStatus: outcome.status,
  };
}

/**
 * A lease taken back before its work could begin (an admin's release of a stuck slot, a pull
 * whose consumer left): the task is pending now, its attempt given back, no wait counted.
 */
export function takenBack(error: string, nowMs: number): Settlement {
  return { status: 'pending', reason: 'released', runAt: new Date(nowMs), attemptsDelta: -1, deferralsDelta: 0, error, httpStatus: null };
}

/**
 * A wait that uses no attempt (a Retry-After deferral, a release by the lease holder). Such
 * waits are bounded: past `LIMITS.maxDeferrals` of them, the next one is a failed attempt.
 */
export function giveBack(
  task: SettleInput,
  reason: 'deferred' | 'released',
  delayMs: number,
  error: string,
  httpStatus: number | null,
  nowMs: number,
  random: number,
): Settlement {
  if (task.deferrals >= LIMITS.maxDeferrals) {
    const why = `${error}, past the limit of ${LIMITS.maxDeferrals} waits that use no attempt`;
    return decide(task, { type: 'failed', retryable: true, error: why, status: httpStatus }, nowMs, random);
  }
  return { status: 'pending', reason, runAt: new Date(nowMs + delayMs), attemptsDelta: -1, deferralsDelta: 1, error, httpStatus };
}

/**
 * What an outcome says of its origin's health (docs/DESIGN.md §5, "Endpoints"): `ok` (a 2xx),
 * `fail` (no connection, no answer in time, a 5xx), `hold` (a 429 or 503 with Retry-After: the
 * origin waits until then), `other` (any other answer: the endpoint's own meaning, not its
 * health); `null` when no request reached for it (Sluice refused the target).
 */
export type EndpointHealth = 'ok' | 'fail' | 'hold' | 'other';

/** An origin's state: `paused` after failures in a row (or by hand), `probing` while its one probe is out. */
export const ENDPOINT_STATES = ['healthy', 'paused', 'probing'] as const;
export type EndpointState = (typeof ENDPOINT_STATES)[number];

export function endpointHealth(outcome: Outcome): EndpointHealth | null {
  switch (outcome.type) {
    case 'succeeded':
    case 'lease_kept':
      return 'ok';
    case 'deferred':
      return 'hold';
    case 'unanswered':
      return 'fail';
    case 'failed':
      if (outcome.status === null) return outcome.retryable ? 'fail' : null;
      return outcome.status >= 500 ? 'fail' : 'other';
  }
}
