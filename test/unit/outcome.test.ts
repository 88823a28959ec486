import { describe, expect, it } from 'vitest';
import { classifyPush, decide, type PushResult, parseRetryAfter } from '../../src/core/outcome.ts';
import { storable, truncate } from '../../src/core/text.ts';
import { DEFAULT_RETRY, LIMITS } from '../../src/core/types.ts';

const NOW = Date.parse('2026-11-21T12:00:00Z');
const response = (status: number, headers: Record<string, string> = {}, body = ''): PushResult => ({
  kind: 'response',
  status,
  headers,
  body,
  durationMs: 5,
});

describe('classifyPush', () => {
  it('treats every 2xx as success and keeps the body as the result', () => {
    expect(classifyPush(response(200, {}, '{"ok":1}'), NOW)).toEqual({ type: 'succeeded', result: '{"ok":1}', status: 200 });
    expect(classifyPush(response(204), NOW)).toEqual({ type: 'succeeded', result: null, status: 204 });
  });

  it('defers a 429 or 503 that carries Retry-After, in seconds or as a date', () => {
    expect(classifyPush(response(429, { 'retry-after': '7' }), NOW)).toEqual({ type: 'deferred', delayMs: 7_000, status: 429 });
    const date = new Date(NOW + 90_000).toUTCString();
    expect(classifyPush(response(503, { 'retry-after': date }), NOW)).toEqual({ type: 'deferred', delayMs: 90_000, status: 503 });
  });

  it('clamps a huge Retry-After to the maximum deferral', () => {
    expect(classifyPush(response(429, { 'retry-after': '999999999' }), NOW)).toMatchObject({ delayMs: LIMITS.maxDeferralMs });
  });

  it('fails a 429 without Retry-After, a 500 and a redirect (redirects are never followed)', () => {
    expect(classifyPush(response(429), NOW)).toMatchObject({ type: 'failed', retryable: true, status: 429 });
    expect(classifyPush(response(500, {}, 'boom'), NOW)).toEqual({ type: 'failed', retryable: true, error: 'HTTP 500: boom', status: 500 });
    expect(classifyPush(response(302), NOW)).toMatchObject({
      type: 'failed',
      retryable: true,
      error: 'redirect 302 (redirects are not followed)',
    });
  });

  it('makes a failure final when the endpoint answers Sluice-Retry: false', () => {
    expect(classifyPush(response(422, { 'sluice-retry': 'false' }), NOW)).toMatchObject({ type: 'failed', retryable: false });
  });

  it('holds the slot after a timeout or a lost connection (the handler may be running); refusals are final', () => {
    expect(classifyPush({ kind: 'timeout', durationMs: 30_000 }, NOW)).toEqual({
      type: 'unanswered',
      error: 'push timed out after 30000 ms',
      cause: 'timeout',
    });
    expect(classifyPush({ kind: 'network', message: 'Network connection lost.', sent: true, durationMs: 1 }, NOW)).toMatchObject({
      type: 'unanswered',
      cause: 'connection lost',
    });
    // Surely never sent (refused, no such host): the attempt fails at once and retries.
    expect(classifyPush({ kind: 'network', message: 'ECONNREFUSED', sent: false, durationMs: 1 }, NOW)).toMatchObject({
      type: 'failed',
      retryable: true,
    });
    expect(classifyPush({ kind: 'refused', message: 'private', durationMs: 0 }, NOW)).toMatchObject({ retryable: false });
  });
});

describe('parseRetryAfter', () => {
  it('reads seconds and dates, and ignores garbage', () => {
    expect(parseRetryAfter('0', NOW)).toBe(0);
    expect(parseRetryAfter(undefined, NOW)).toBeNull();
    expect(parseRetryAfter('soon', NOW)).toBeNull();
    expect(parseRetryAfter(new Date(NOW - 5_000).toUTCString(), NOW)).toBe(0);
  });
});

describe('decide', () => {
  const task = { attempts: 1, maxAttempts: 3, deferrals: 0, backoff: { ...DEFAULT_RETRY.backoff, jitter: 0 } };

  it('retries a failed attempt after the backoff, keeping the attempt counted', () => {
    const s = decide(task, { type: 'failed', retryable: true, error: 'HTTP 500', status: 500 }, NOW, 0.5);
    expect(s).toEqual({
      status: 'pending',
      reason: 'retry',
      runAt: new Date(NOW + 1_000),
      attemptsDelta: 0,
      deferralsDelta: 0,
      error: 'HTTP 500',
      httpStatus: 500,
    });
  });

  it('kills the task on its last attempt, or when the failure is final', () => {
    expect(decide({ ...task, attempts: 3 }, { type: 'failed', retryable: true, error: 'x', status: 500 }, NOW, 0.5)).toMatchObject({
      status: 'dead',
    });
    expect(decide(task, { type: 'failed', retryable: false, error: 'x', status: 400 }, NOW, 0.5)).toEqual({
      status: 'dead',
      error: 'x',
      httpStatus: 400,
    });
  });

  it('gives the attempt back on a deferral, until the deferral limit', () => {
    const deferred = { type: 'deferred', delayMs: 5_000, status: 429 } as const;
    expect(decide(task, deferred, NOW, 0.5)).toMatchObject({
      status: 'pending',
      runAt: new Date(NOW + 5_000),
      attemptsDelta: -1,
      deferralsDelta: 1,
    });
    expect(decide({ ...task, deferrals: LIMITS.maxDeferrals }, deferred, NOW, 0.5)).toMatchObject({
      status: 'pending',
      attemptsDelta: 0,
      deferralsDelta: 0,
    });
  });

  it('stores at most 64 KiB of a result', () => {
    const s = decide(task, { type: 'succeeded', result: 'x'.repeat(LIMITS.resultBytes + 10), status: 200 }, NOW, 0.5);
    expect(s.status === 'succeeded' && s.result?.length).toBe(LIMITS.resultBytes);
  });
});

describe('text helpers', () => {
  it('truncate never splits a surrogate pair', () => {
    expect(truncate('ab😀', 3)).toBe('ab');
    expect(truncate('abc', 5)).toBe('abc');
  });

  it('storable removes what Postgres cannot hold: NUL and lone surrogates', () => {
    expect(storable('a\u0000b\ud83dc')).toBe('a\ufffdb\ufffdc');
  });

  it('decide keeps results and errors storable', () => {
    const s = decide(
      { attempts: 1, maxAttempts: 3, deferrals: 0, backoff: DEFAULT_RETRY.backoff },
      { type: 'succeeded', result: 'ok\u0000', status: 200 },
      NOW,
      0.5,
    );
    expect(s).toMatchObject({ result: 'ok\ufffd' });
    const f = classifyPush(response(500, {}, `${'x'.repeat(499)}😀`), NOW);
    expect(f.type === 'failed' && f.error.isWellFormed()).toBe(true);
  });
});
