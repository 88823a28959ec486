/**
 * /v1/queues: effective settings and where each comes from, run-time overrides (which win
 * over SLUICE_QUEUES until removed), per-key limits, pause/resume, who holds the slots, and
 * an admin's release of a stuck lease.
 */
import { Hono } from 'hono';
import { type Config, NAME_PATTERN, queueDefaults } from '../../config.ts';
import { NotFoundError, ValidationError } from '../../core/errors.ts';
import { fieldIssues } from '../../core/issues.ts';
import { type EffectiveQueueLimits, type Rate, resolveKeyLimit, resolveKeyRate, resolveQueueLimits } from '../../core/limits.ts';
import { textProblem } from '../../core/text.ts';
import { LIMITS } from '../../core/types.ts';
import type { Db } from '../../db/db.ts';
import {
  concurrencySnapshot,
  keyLimitDelete,
  keyLimitPut,
  leaseForceRelease,
  type QueueCounts,
  queueCounts,
  queueNamesKnown,
  queueOverride,
  queueOverrideDelete,
  queueOverridePatch,
  queueOverrides,
} from '../../db/queues.ts';
import { requireScope } from '../auth.ts';
import { readJson } from '../body.ts';
import type { AppEnv } from '../context.ts';
import { keyLimitSchema, overridePatchSchema } from '../schemas.ts';

export const queues = new Hono<AppEnv>();

const NO_COUNTS: QueueCounts = { pending: 0, leased: 0, dead: 0 };

/** PUT /v1/queues/:queue: the fields given are overridden; `null` removes an override; others stay. */

queues.get('/', requireScope('tasks:read'), async (c) => {
  const { config, db } = c.var;
  const [known, overrides, counts] = await Promise.all([queueNamesKnown(db), queueOverrides(db), queueCounts(db)]);
  const names = [...new Set([...Object.keys(config.queues), ...known])].sort();
  return c.json({
    queues: names.map((name) =>
      queueView(
        config,
        name,
        resolveQueueLimits(config.queues[name], overrides.get(name)?.settings ?? null),
        counts.get(name) ?? NO_COUNTS,
      ),
    ),
  });
});

queues.get('/:queue', requireScope('tasks:read'), async (c) => {
  const name = queueName(c.req.param('queue'));
  return c.json(await describeQueue(c.var.config, c.var.db, name));
});

queues.put('/:queue', requireScope('admin'), async (c) => {
  const name = queueName(c.req.param('queue'));
  const parsed = overridePatchSchema.safeParse(await readJson(c.req.raw, LIMITS.requestBytes));
  if (!parsed.success) throw new ValidationError(fieldIssues(parsed.error));
  await queueOverridePatch(c.var.db, name, parsed.data);
  c.var.poke();
  return c.json(await describeQueue(c.var.config, c.var.db, name));
});

queues.delete('/:queue', requireScope('admin'), async (c) => {
  const name = queueName(c.req.param('queue'));
  if (!(await queueOverrideDelete(c.var.db, name))) throw new NotFoundError(`an override of queue ${name}`);
  c.var.poke();
  return c.json(await describeQueue(c.var.config, c.var.db, name));
});

for (const [action, paused] of [
  ['pause', true],
  ['resume', false],
] as const) {
  queues.post(`/:queue/${action}`, requireScope('admin'), async (c) => {
    const name = queueName(c.req.param('queue'));
    await queueOverridePatch(c.var.db, name, { paused });
    if (!paused) c.var.poke();
    return c.json(await describeQueue(c.var.config, c.var.db, name));
  });
}

queues.put('/:queue/keys/:key', requireScope('admin'), async (c) => {
  const name = queueName(c.req.param('queue'));
  const key = concurrencyKey(c.req.param('key'));
  const parsed = keyLimitSchema.safeParse(await readJson(c.req.raw, LIMITS.requestBytes));
  if (!parsed.success) throw new ValidationError(fieldIssues(parsed.error));
  await keyLimitPut(c.var.db, name, key, parsed.data.limit);
  c.var.poke();
  return c.json({ queue: name, key, limit: parsed.data.limit, source: 'override' });
});

queues.delete('/:queue/keys/:key', requireScope('admin'), async (c) => {
  const name = queueName(c.req.param('queue'));
  const key = concurrencyKey(c.req.param('key'));
  if (!(await keyLimitDelete(c.var.db, name, key))) throw new NotFoundError(`a limit for key ${key} of queue ${name}`);
  c.var.poke();
  return c.body(null, 204);
});

queues.get('/:queue/concurrency', requireScope('tasks:read'), async (c) => {
  const { config, db } = c.var;
  const name = queueName(c.req.param('queue'));
  const [override, snapshot] = await Promise.all([queueOverride(db, name), concurrencySnapshot(db, name)]);
  const limits = resolveQueueLimits(config.queues[name], override?.settings ?? null);
  const byKey = new Map<string, typeof snapshot.holders>();
  const keyless: typeof snapshot.holders = [];
  for (const h of snapshot.holders) {
    if (h.concurrencyKey === null) keyless.push(h);
    else byKey.set(h.concurrencyKey, [...(byKey.get(h.concurrencyKey) ?? []), h]);
  }
  const keys = [...new Set([...byKey.keys(), ...snapshot.keyLimits.keys()])].sort();
  const rate = (r: { value: Rate | null; source: string }, used: number) => ({ value: r.value, source: r.source, used });
  const slots = (holders: typeof snapshot.holders) =>
    holders.map((h) => ({
      task_id: h.taskId,
      lease_id: h.leaseId,
      leased_at: h.leasedAt.toISOString(),
      expires_at: h.expiresAt.toISOString(),
    }));
  return c.json({
    queue: name,
    cluster: { limit: config.clusterCap, source: config.clusterCap === null ? 'default' : 'env', active: snapshot.clusterActive },
    queue_level: {
      limit: limits.concurrency.value,
      source: limits.concurrency.source,
      active: snapshot.holders.length,
      paused: limits.paused.value,
      rate: rate(limits.rate, snapshot.rateUsed.get('*') ?? 0),
    },
    keys: keys.map((key) => {
      const inputs = snapshot.keyLimits.get(key);
      const limit = resolveKeyLimit(key, inputs?.override ?? null, inputs?.taskLimit ?? null, limits.keyConcurrency);
      const holders = byKey.get(key) ?? [];
      const keyRate = resolveKeyRate(key, inputs?.taskRate ?? null, limits.keyRate);
      return {
        key,
        limit: limit.value,
        source: limit.source,
        active: holders.length,
        rate: rate(keyRate, snapshot.rateUsed.get(key) ?? 0),
        slots: slots(holders),
      };
    }),
    keyless: { active: keyless.length, slots: slots(keyless) },
  });
});

queues.post('/:queue/leases/:lease/release', requireScope('admin'), async (c) => {
  const name = queueName(c.req.param('queue'));
  const lease = c.req.param('lease');
  const taskId = UUID.test(lease) ? await leaseForceRelease(c.var.db, name, lease) : null;
  if (!taskId) throw new NotFoundError(`a lease ${lease} held in queue ${name}`);
  c.var.poke();
  return c.json({ released: true, task_id: taskId, lease_id: lease });
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

async function describeQueue(config: Config, db: Db, name: string) {
  const [override, counts] = await Promise.all([queueOverride(db, name), queueCounts(db, name)]);
  return queueView(config, name, resolveQueueLimits(config.queues[name], override?.settings ?? null), counts.get(name) ?? NO_COUNTS);
}

function queueView(config: Config, name: string, limits: EffectiveQueueLimits, counts: QueueCounts) {
  const defaults = queueDefaults(config, name);
  const field = <T>(r: { value: T; source: string }) => ({ value: r.value, source: r.source });
  return {
    name,
    concurrency: field(limits.concurrency),
    key_concurrency: field(limits.keyConcurrency),
    priority: field(limits.priority),
    paused: field(limits.paused),
    rate: field(limits.rate),
    key_rate: field(limits.keyRate),
    key_from: defaults.keyFrom,
    url: defaults.url,
    max_attempts: defaults.maxAttempts,
    lease_ms: defaults.leaseMs,
    timeout_ms: defaults.timeoutMs,
    counts,
  };
}

function queueName(text: string): string {
  if (text.length > LIMITS.nameChars || !NAME_PATTERN.test(text))
    throw new ValidationError([{ path: 'queue', message: 'is not a valid queue name' }]);
  return text;
}

function concurrencyKey(text: string): string {
  const problem = text.length > LIMITS.keyChars ? `is longer than ${LIMITS.keyChars} characters` : textProblem(text);
  if (problem) throw new ValidationError([{ path: 'key', message: problem }]);
  return text;
}
