/**
 * Limit arithmetic (docs/DESIGN.md §5), pure. Which value of a setting is in force and where it
 * comes from, and how much room a level has left. The claim statement
 * (migrations/functions/claim.sql) applies the same precedence inside Postgres, atomically; the
 * API uses these to show it.
 */
import { type KeyStrategy, QUEUE_SETTINGS, type QueueLimits, type QueueSettingName } from './queue-settings.ts';

/** Where a value in force comes from. */
export type Source = 'override' | 'env' | 'task' | 'default';

export interface Resolved<T> {
  value: T;
  source: Source;
}

/**
 * At most `limit` pushes in any window of `period_ms`; with `burst` (a queue's rates only), up to
 * `burst` at once, refilling at `limit` per `period_ms` (a token bucket).
 */
export interface Rate {
  limit: number;
  period_ms: number;
  burst?: number | undefined;
}

/** The settings of a queue, as given by the environment or a run-time override. */
export type QueueLimitSettings = QueueLimits;

export interface EffectiveQueueLimits {
  concurrency: Resolved<number | null>;
  keyConcurrency: Resolved<number | null>;
  priority: Resolved<number>;
  paused: Resolved<boolean>;
  rate: Resolved<Rate | null>;
  keyRate: Resolved<Rate | null>;
  adaptive: Resolved<boolean>;
  adaptiveMin: Resolved<number>;
  /** Consumed by pulling, not pushed. */
  pull: Resolved<boolean>;
  /** What an enqueue does to a key with unfinished tasks (read at enqueue, src/db/key-strategy.ts). */
  keyStrategy: Resolved<KeyStrategy>;
}

/** An override wins over the environment, field by field; otherwise the default holds. */
export function resolveQueueLimits(env: QueueLimitSettings | undefined, override: QueueLimitSettings | null): EffectiveQueueLimits {
  function pick<T>(field: QueueSettingName): Resolved<T> {
    const o = override?.[field];
    if (o !== undefined && o !== null) return { value: o as T, source: 'override' };
    const e = env?.[field];
    if (e !== undefined && e !== null) return { value: e as T, source: 'env' };
    return { value: QUEUE_SETTINGS[field].fallback as T, source: 'default' };
  }
  return {
    concurrency: pick('concurrency'),
    keyConcurrency: pick('key_concurrency'),
    priority: pick('priority'),
    paused: pick('paused'),
    rate: pick('rate'),
    keyRate: pick('key_rate'),
    adaptive: pick('adaptive'),
    adaptiveMin: pick('adaptive_min'),
    pull: pick('pull'),
    keyStrategy: pick('key_strategy'),
  };
}

/**
 * The limit a claim applies at a level (`sluice.learnt_limit`, migrations/functions/claim.sql:
 * the same rule and arguments, held together by test/db/limit-precedence.test.ts). `learnt` is
 * what an adaptive queue's level learnt (null when the queue is not adaptive, or learnt nothing):
 * then the configured limit holds; else the learnt one, never above the configured limit, nor
 * below the queue's `adaptive_min` or what waiting tasks already hold plus one.
 */
export function learntLimit(limit: number | null, learnt: number | null, floor: number, waiting: number): number | null {
  if (learnt === null) return limit;
  return Math.min(limit ?? learnt, Math.max(learnt, floor, waiting + 1));
}

/** A key's rate: the one its first task gave (`rate_limit`), else the queue's `key_rate`. */
export function resolveKeyRate(key: string | null, taskRate: Rate | null, queueKeyRate: Resolved<Rate | null>): Resolved<Rate | null> {
  if (key === null) return { value: null, source: 'default' };
  if (taskRate !== null) return { value: taskRate, source: 'task' };
  return queueKeyRate;
}

/**
 * A key's limit: an override set for the key, else the limit its first task gave
 * (`concurrency_limit`, "sets the limit if not already set"), else the queue's
 * `key_concurrency`. Keyless tasks have no key limit.
 */
export function resolveKeyLimit(
  key: string | null,
  override: number | null,
  taskLimit: number | null,
  queueKeyConcurrency: Resolved<number | null>,
): Resolved<number | null> {
  if (key === null) return { value: null, source: 'default' };
  if (override !== null) return { value: override, source: 'override' };
  if (taskLimit !== null) return { value: taskLimit, source: 'task' };
  return queueKeyConcurrency;
}

/**
 * How many tasks a rate with `burst` lets a claim at `nowMs` lease, given its bucket's arrival
 * time (`sluice.bucket_room` in migrations/functions/claim.sql, the same arithmetic): `burst`
 * when idle, less one per T = period_ms / limit still ahead.
 */
export function bucketRoom(rate: Rate & { burst: number }, tatMs: number | null, nowMs: number): number {
  const t = rate.period_ms / rate.limit;
  const ahead = Math.max(tatMs ?? nowMs, nowMs) - nowMs;
  return Math.min(rate.burst, Math.floor((rate.burst * t - ahead) / t + 1e-9));
}

/** Slots left at a level: `Infinity` when it has no limit, never below zero. */
export function room(limit: number | null, active: number): number {
  return limit === null ? Number.POSITIVE_INFINITY : Math.max(0, limit - active);
}
