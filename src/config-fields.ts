/**
 * How each kind of environment variable is read (docs/DESIGN.md §7): the zod pieces `config.ts`
 * builds the environment's schema of, each with a message that names the fix. Queue names and a
 * queue's options in `SLUICE_QUEUES`, API keys, signing keys, secrets, origins, durations.
 */
import type { JWK } from 'jose';
import { z } from 'zod';
import type { FieldIssue } from './core/errors.ts';
import { queueLimitsSchema } from './core/queue-settings.ts';
import { LIMITS } from './core/types.ts';
import { webhookSecretBytes } from './protocol/webhook.ts';
import { type ApiKeyEntry, SCOPES } from './security/api-keys.ts';
import { signingKeyProblems } from './security/keyring.ts';

/** Queue and task names: short, URL-safe, no surprises in logs or paths. */
export const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]*$/;

export const backoffSchema = z
  .object({
    initial_ms: z.number().int().min(0).max(LIMITS.maxDelayMs).optional(),
    max_ms: z.number().int().min(0).max(LIMITS.maxDelayMs).optional(),
    factor: z.number().min(1).max(100).optional(),
    jitter: z.number().min(0).max(1).optional(),
  })
  .strict();

/** A body field path such as `customer_id` or `customer.id`. */
const KEY_FROM_PATTERN = /^[^.\s]+(\.[^.\s]+)*$/;

/** Options of one queue in `SLUICE_QUEUES` (snake_case, as on the wire). */
export const queueOptionsSchema = queueLimitsSchema
  .extend({
    /** Derive a task's concurrency key from this body field (dotted path); missing → the empty key. */
    key_from: z.string().min(1).max(200).regex(KEY_FROM_PATTERN, 'must be a field name or a dotted path such as customer.id').optional(),
    url: z.string().max(LIMITS.urlChars).optional(),
    max_attempts: z.number().int().min(1).max(LIMITS.maxAttempts).optional(),
    backoff: backoffSchema.optional(),
    lease_ms: z.number().int().min(1_000).max(LIMITS.maxLeaseMs).optional(),
    timeout_ms: z.number().int().min(100).max(LIMITS.maxLeaseMs).optional(),
  })
  .strict();
export type QueueOptions = z.infer<typeof queueOptionsSchema>;

export const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

/** A JSON value given as a string (env vars, secrets) or already parsed (wrangler JSON vars). */
export function json<T extends z.ZodType>(schema: T) {
  return z.preprocess((value, ctx) => {
    if (typeof value !== 'string') return value;
    try {
      return JSON.parse(value);
    } catch {
      // The parser's message may quote the text, and the text may be a secret: say less.
      ctx.addIssue({ code: 'custom', message: 'is not valid JSON' });
      return z.NEVER;
    }
  }, schema);
}

/** A `whsec_…` secret, or null when unset. */
export const webhookSecret = () =>
  z
    .string()
    .optional()
    .transform((secret, ctx) => {
      if (!secret) return null;
      try {
        return webhookSecretBytes(secret);
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message });
        return z.NEVER;
      }
    });

/** An http(s) origin (scheme, host, port; no path), refused with `message` otherwise. */
export const origin = (message: string) =>
  z.string().transform((text, ctx) => {
    const url = URL.canParse(text) ? new URL(text) : null;
    const bare = url && !url.username && !url.password && url.pathname === '/' && !url.search && !url.hash;
    if (!url || !bare || (url.protocol !== 'https:' && url.protocol !== 'http:')) {
      ctx.addIssue({ code: 'custom', message });
      return z.NEVER;
    }
    return url.origin;
  });

/** The origin browsers reach Sluice at, or null when unset. */
export const publicOrigin = () =>
  z
    .string()
    .optional()
    .transform((text) => text || null)
    .pipe(origin('must be the origin browsers reach Sluice at, such as https://sluice.example.com (scheme and host, no path)').nullable());

/**
 * Cloudflare's Durable Object location hints (`DurableObjectLocationHint`): where an object is
 * created, honoured at its creation only.
 */
export const LOCATION_HINTS = ['wnam', 'enam', 'sam', 'weur', 'eeur', 'apac', 'oc', 'afr', 'me'] as const;
export type LocationHint = (typeof LOCATION_HINTS)[number];

/**
 * What is wrong with one entry of an API key's `queues`, or `null`: a queue name, or a prefix of
 * names ending in `*` (`reports-*`). A `*` anywhere else is refused, not read as a literal: no
 * queue name holds one, so such a pattern could only be a mistake.
 */
export function queuePatternProblem(text: string): string | null {
  const star = text.indexOf('*');
  if (star !== -1 && star !== text.length - 1)
    return 'may hold `*` only at its end (reports-* is every queue whose name starts with reports-)';
  const name = star === -1 ? text : text.slice(0, -1);
  if (name === '') return star === -1 ? 'is empty' : 'is `*` alone, every queue: leave `queues` out for a key of every queue';
  if (name.length > LIMITS.nameChars) return `is longer than ${LIMITS.nameChars} characters, as no queue name is`;
  if (!NAME_PATTERN.test(name)) return 'is not a queue name (a letter or digit, then letters, digits and _ . : -), nor one followed by `*`';
  return null;
}

export const queuePattern = z.string().superRefine((text, ctx) => {
  const problem = queuePatternProblem(text);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

export const apiKeysSchema = z
  .array(
    z
      .object({
        name: z.string().min(1).max(LIMITS.nameChars),
        sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be the lower-case hex SHA-256 of the key (npm run keys:api)'),
        scopes: z.array(z.enum(SCOPES)).min(1),
        forward_to: z
          .array(origin('must be an origin a pull may forward to, such as https://dev.example.com (scheme and host, no path)'))
          .max(20)
          .optional(),
        queues: z
          .array(queuePattern)
          .min(1, 'must list at least one queue (leave `queues` out for a key of every queue)')
          .max(100)
          .optional(),
      })
      .strict()
      .transform(({ forward_to, ...entry }): ApiKeyEntry => (forward_to ? { ...entry, forwardTo: forward_to } : entry)),
  )
  .min(1, 'needs at least one key (create one with: npm run keys:api)');

export const signingKeysSchema = z.custom<{ keys: JWK[] }>().superRefine((value, ctx) => {
  for (const message of signingKeyProblems(value))
    ctx.addIssue({ code: 'custom', message: `${message} (create a key with: npm run keys:signing)` });
});

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `7d`, `12h`, `30m`, `45s`, `500ms` or bare milliseconds; `forever` = `null`; else undefined. */
export function parseRetention(text: string): number | null | undefined {
  const t = text.trim().toLowerCase();
  if (t === 'forever') return null;
  const m = /^(\d{1,12})(ms|s|m|h|d)?$/.exec(t);
  if (!m) return undefined;
  const ms = Number(m[1]) * (DURATION_UNITS[m[2] ?? 'ms'] ?? 1);
  return ms >= 60_000 ? ms : undefined;
}

export function blankToUndefined(env: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(env)) {
    if (typeof v === 'string' && v.trim() === '') continue;
    out[k] = v;
  }
  return out;
}

export function explain(issue: FieldIssue): FieldIssue {
  if (issue.message.startsWith('Invalid input: expected string, received undefined')) {
    return { ...issue, message: 'is required (set it as a secret: wrangler secret put, or in .dev.vars)' };
  }
  return issue;
}
