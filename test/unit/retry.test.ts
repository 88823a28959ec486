import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { backoffDelayMs, doublingBackoffMs } from '../../src/core/retry.ts';

describe('backoffDelayMs', () => {
  const backoff = { initialMs: 1_000, maxMs: 60_000, factor: 2, jitter: 0.25 };

  it('doubles per attempt without jitter at the midpoint draw', () => {
    expect([1, 2, 3, 4].map((a) => backoffDelayMs(backoff, a, 0.5))).toEqual([1_000, 2_000, 4_000, 8_000]);
  });

  it('is capped at max_ms', () => {
    expect(backoffDelayMs(backoff, 30, 0.99)).toBe(60_000);
  });

  it('stays within ±jitter of the exponential delay and within [0, max]', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10_000 }),
        fc.integer({ min: 0, max: 1_000_000 }),
        fc.double({ min: 1, max: 5, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.integer({ min: 1, max: 60 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (initialMs, extra, factor, jitter, attempt, random) => {
          const b = { initialMs, maxMs: initialMs + extra, factor, jitter };
          const base = Math.min(b.maxMs, initialMs * factor ** (attempt - 1));
          const d = backoffDelayMs(b, attempt, random);
          expect(d).toBeGreaterThanOrEqual(Math.max(0, Math.floor(base * (1 - jitter)) - 1));
          expect(d).toBeLessThanOrEqual(Math.min(b.maxMs, Math.ceil(base * (1 + jitter)) + 1));
        },
      ),
    );
  });
});

describe('doublingBackoffMs', () => {
  it('starts at the first wait, doubles, and stops at the bound', () => {
    expect([1, 2, 3, 4, 5, 6].map((n) => doublingBackoffMs(n, 100, 1_000))).toEqual([100, 200, 400, 800, 1_000, 1_000]);
    // However many failures: no overflow to Infinity or NaN past the bound.
    expect(doublingBackoffMs(10_000, 100, 1_000)).toBe(1_000);
    expect(doublingBackoffMs(10_000, 100, Number.POSITIVE_INFINITY)).toBeLessThan(Number.POSITIVE_INFINITY);
  });

  it('with full jitter, waits that part of it, within [0, the wait)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 60 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (n, random) => {
        const ms = doublingBackoffMs(n, 50, 30_000, random);
        expect(ms).toBeGreaterThanOrEqual(0);
        expect(ms).toBeLessThan(doublingBackoffMs(n, 50, 30_000) + 1e-9);
        expect(ms).toBeCloseTo(doublingBackoffMs(n, 50, 30_000) * random);
      }),
    );
  });
});
