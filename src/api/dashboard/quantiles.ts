/**
 * Quantiles estimated from a histogram's buckets, as Prometheus's `histogram_quantile` does:
 * find the bucket the rank falls in and interpolate linearly within it (from 0 for the first).
 * Pure; the counts are per bucket as `sluice.counters` keeps them (not cumulative).
 */

export interface Quantile {
  /** Seconds; for a rank in the last, unbounded bucket, the highest finite bound. */
  seconds: number;
  /** True when the rank is beyond the highest finite bound: the value is at least `seconds`. */
  atLeast: boolean;
}

/**
 * The `q`-quantile (0 < q < 1) of observations counted per bucket (`counts[i]` in the bucket
 * whose upper bound is `bounds[i]`; `counts[bounds.length]` above the last); `null` when empty.
 */
export function quantile(q: number, bounds: readonly number[], counts: readonly number[]): Quantile | null {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total <= 0) return null;
  const rank = q * total;
  let below = 0;
  for (let i = 0; i < bounds.length; i++) {
    const inBucket = counts[i] ?? 0;
    if (below + inBucket >= rank && inBucket > 0) {
      const lower = i === 0 ? 0 : (bounds[i - 1] as number);
      const upper = bounds[i] as number;
      return { seconds: lower + (upper - lower) * ((rank - below) / inBucket), atLeast: false };
    }
    below += inBucket;
  }
  return { seconds: bounds.at(-1) ?? 0, atLeast: true };
}
