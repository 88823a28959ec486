/**
 * Every queue setting, declared once (docs/DESIGN.md §5): its name on the wire, its value's
 * schema, its default, what it means, and what reads it (the claim, or the enqueue).
 * `SLUICE_QUEUES` (src/config.ts), the run-time override (`PUT /v1/queues/:queue`), the claim's
 * JSON (`claimQueuesJson`, the claim-time ones), the precedence (core/limits.ts) and the
 * describe view derive from this list; the CLI's flags, the SQL that reads each setting and the
 * SDK's wire types are held to it by test/unit/queue-settings.test.ts.
 */
import { z } from 'zod';
import { LIMITS } from './types.ts';

/** A rate limit: at most `limit` pushes in any window of `period_ms` (a sliding window). */
export const rateSchema = z
  .object({
    limit: z.number().int().min(1).max(1_000_000),
    period_ms: z.number().int().min(1).max(LIMITS.maxRatePeriodMs),
  })
  .strict();

/**
 * A queue's or its keys' rate (`rate`, `key_rate`), which may carry `burst`: then a token bucket
 * (0017_rate_burst.sql), up to `burst` at once, refilling at `limit` per `period_ms`, instead of
 * the sliding window. A task's `rate_limit` takes no burst.
 */
export const queueRateSchema = rateSchema.extend({ burst: z.number().int().min(1).max(1_000_000).optional() }).strict();

const count = () => z.number().int().min(1).max(1_000_000);

/**
 * What an enqueue does to a concurrency key that has unfinished tasks (`key_strategy`,
 * src/db/key-strategy.ts): `queue` adds the task behind them; `cancel_in_progress` cancels them
 * all, a leased one ending at once; `cancel_newest` adds nothing and answers the unfinished
 * task (`skipped`); `replace_pending` cancels the pending ones and leaves a running one be.
 */
export const KEY_STRATEGIES = ['queue', 'cancel_in_progress', 'cancel_newest', 'replace_pending'] as const;
export type KeyStrategy = (typeof KEY_STRATEGIES)[number];

/**
 * One setting: the schema of its value (never null), the value that holds when none is given,
 * its meaning, and what reads it: the claim (it travels in the claim's JSON) or the enqueue.
 */
interface Setting<S extends z.ZodType> {
  schema: S;
  fallback: z.output<S> | null;
  about: string;
  readBy: 'claim' | 'enqueue';
}
const setting = <S extends z.ZodType>(
  schema: S,
  fallback: z.output<S> | null,
  about: string,
  readBy: Setting<S>['readBy'] = 'claim',
): Setting<S> => ({ schema, fallback, about, readBy });

export const QUEUE_SETTINGS = {
  concurrency: setting(count(), null, 'Leased tasks in the queue at once.'),
  key_concurrency: setting(count(), null, 'Leased tasks per concurrency key at once (a key’s default limit).'),
  priority: setting(z.number().int().min(-1_000_000).max(1_000_000), 0, 'Between queues: lower is claimed first.'),
  paused: setting(z.boolean(), false, 'Nothing is claimed from a paused queue; leased tasks finish.'),
  rate: setting(queueRateSchema, null, 'Pushes of the queue per period.'),
  key_rate: setting(queueRateSchema, null, 'Pushes per concurrency key per period (a key’s default rate).'),
  adaptive: setting(
    z.boolean(),
    false,
    'Limits that learn (AIMD): the queue’s and its keys’ limits become ceilings, cut to 85% on an overload answer (429, 503, a refused connection, no answer), raised after a window of successes (by one, or by a quarter once well past the last cut).',
  ),
  adaptive_min: setting(count(), 1, 'The lowest limit an adaptive queue’s levels learn; the configured limits stay the highest.'),
  pull: setting(
    z.boolean(),
    false,
    'Consumed by pulling (POST /v1/queues/:queue/lease), not pushed: its tasks need no url, and the dispatcher leaves them to the consumers.',
  ),
  key_strategy: setting(
    z.enum(KEY_STRATEGIES),
    'queue',
    'What an enqueue does to a concurrency key with unfinished tasks: `queue` waits behind them; `cancel_in_progress` cancels them (a leased one at once); `cancel_newest` makes nothing and answers the unfinished task (`skipped`); `replace_pending` cancels the pending ones.',
    'enqueue',
  ),
} as const;

export type QueueSettingName = keyof typeof QUEUE_SETTINGS;
export const QUEUE_SETTING_NAMES = Object.keys(QUEUE_SETTINGS) as QueueSettingName[];
/** The settings the claim reads (from its JSON and the override), not the enqueue. */
export const CLAIM_SETTING_NAMES = QUEUE_SETTING_NAMES.filter((name) => QUEUE_SETTINGS[name].readBy === 'claim');

type Settings = typeof QUEUE_SETTINGS;

/** The settings as `SLUICE_QUEUES` gives them: each optional. */
export const queueLimitsSchema = z
  .object(
    Object.fromEntries(
      QUEUE_SETTING_NAMES.map((name) => [name, QUEUE_SETTINGS[name].schema.optional().describe(QUEUE_SETTINGS[name].about)]),
    ) as {
      [K in QueueSettingName]: z.ZodOptional<Settings[K]['schema']>;
    },
  )
  .strict();
export type QueueLimits = z.infer<typeof queueLimitsSchema>;

/** A run-time override (PUT /v1/queues/:queue): a patch, where null removes a field. */
export const queueSettingsPatchSchema = z
  .object(
    Object.fromEntries(
      QUEUE_SETTING_NAMES.map((name) => [name, QUEUE_SETTINGS[name].schema.nullable().optional().describe(QUEUE_SETTINGS[name].about)]),
    ) as { [K in QueueSettingName]: z.ZodOptional<z.ZodNullable<Settings[K]['schema']>> },
  )
  .strict();
export type QueueSettingsPatchInput = z.infer<typeof queueSettingsPatchSchema>;

/** Only the claim-time settings of `options` (a queue's entry in `SLUICE_QUEUES` holds more). */
export function pickQueueSettings(options: Partial<Record<string, unknown>>): QueueLimits {
  const out: Record<string, unknown> = {};
  for (const name of CLAIM_SETTING_NAMES) if (options[name] !== undefined) out[name] = options[name];
  return out as QueueLimits;
}
