/**
 * Rate limits as the CLI writes and reads them: `N/PERIOD`, e.g. `10/1s`, `100/1m`, `5/250ms`,
 * for the API's `{limit, period_ms}` (at most `limit` pushes in any window of `period_ms`), and
 * `N/PERIOD+B` with a burst: up to B at once, refilling at N per PERIOD.
 * The wire types name rates on tasks only, so the queue views' rate fields are typed here.
 */
import { UsageError } from './errors.ts';

export interface Rate {
  limit: number;
  period_ms: number;
  burst?: number | undefined;
}

export interface RateSetting {
  value: Rate | null;
  source: string;
}

/** A rate in force at one level of `/concurrency`, and the grants still inside its period. */
export interface RateInUse extends RateSetting {
  used: number;
}

const UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `N/PERIOD` or `N/PERIOD+B` → a rate; the API judges the ranges. */
export function parseRate(flag: string, text: string): Rate {
  const match = /^(\d+)\/(\d+)(ms|s|m|h|d)?(?:\+(\d+))?$/.exec(text);
  if (!match) {
    throw new UsageError(
      `--${flag} must be N/PERIOD or N/PERIOD+BURST (e.g. 10/1s, 100/1m, 5/250ms, 10/1s+50) or unset, not ${JSON.stringify(text)}`,
    );
  }
  const rate: Rate = { limit: Number(match[1]), period_ms: Number(match[2]) * UNITS[match[3] ?? 'ms']! };
  return match[4] === undefined ? rate : { ...rate, burst: Number(match[4]) };
}

/** A rate as `parseRate` reads it: the largest unit that divides the period. */
export function rateText(rate: Rate | null): string {
  if (rate === null) return 'none';
  const [unit, size] = Object.entries(UNITS)
    .reverse()
    .find(([, size]) => rate.period_ms % size === 0)!;
  return `${rate.limit}/${rate.period_ms / size}${unit}${rate.burst === undefined ? '' : `+${rate.burst}`}`;
}

export function rateSetting(setting: RateSetting | undefined): string {
  return setting === undefined ? '-' : `${rateText(setting.value)} (${setting.source})`;
}

/** `3 of 10/1s (env)`: how much of a level's rate its recent claims used. */
export function rateUse(rate: RateInUse | undefined): string | null {
  if (rate === undefined || rate.value === null) return null;
  return `${rate.used} of ${rateText(rate.value)} (${rate.source})`;
}
