/**
 * What the queue API (/v1/queues) and the dashboard both do, one code path each: validate the
 * names, read settings with their sources, change limits, pause, free a stuck slot, and poke the
 * dispatcher when a change frees room. The routes turn results into JSON, the dashboard into HTML.
 */
import { type Config, queueDefaults } from '../config.ts';
import { NAME_PATTERN } from '../config-fields.ts';
import { NotFoundError, ValidationError } from '../core/errors.ts';
import { fieldIssues } from '../core/issues.ts';
import {
  bucketRoom,
  type EffectiveQueueLimits,
  learntLimit,
  type Rate,
  resolveKeyLimit,
  resolveKeyRate,
  resolveQueueLimits,
  type Source,
} from '../core/limits.ts';
import { queueSettingsPatchSchema } from '../core/queue-settings.ts';
import { textProblem } from '../core/text.ts';
import { LIMITS } from '../core/types.ts';
import type { Db } from '../db/db.ts';
import {
  concurrencySnapshot,
  keyLimitDelete,
  keyLimitPut,
  type Learnt,
  leaseForceRelease,
  leaseHolder,
  type QueueCounts,
  queueCounts,
  queueNamesKnown,
  queueOverride,
  queueOverrideDelete,
  queueOverridePatch,
  queueOverrides,
  type SlotHolder,
} from '../db/queues.ts';
import { type QueueScope, queueAllowed } from '../security/api-keys.ts';
import type { QueueAnswer } from './answers.ts';
import type { AppEnv } from './context.ts';
import { keyLimitSchema } from './schemas/calls.ts';

/** What an operation needs of a request: the config, the database, and the dispatcher poke. */
export type OpsContext = Pick<AppEnv['Variables'], 'config' | 'db' | 'poke'>;

const NO_COUNTS: QueueCounts = { pending: 0, leased: 0, waiting: 0, dead: 0 };

export function queueName(text: string): string {
  if (text.length > LIMITS.nameChars || !NAME_PATTERN.test(text))
    throw new ValidationError([{ path: 'queue', message: 'is not a valid queue name' }]);
  return text;
}

export function concurrencyKey(text: string): string {
  const problem = text.length > LIMITS.keyChars ? `is longer than ${LIMITS.keyChars} characters` : textProblem(text);
  if (problem) throw new ValidationError([{ path: 'key', message: problem }]);
  return text;
}

export type QueueView = QueueAnswer;

/** Every queue the environment or the database knows (of those `scope` admits), with its settings in force and counts. */
export async function listQueues(config: Config, db: Db, scope: QueueScope = null): Promise<QueueView[]> {
  const [known, overrides, counts] = await Promise.all([queueNamesKnown(db), queueOverrides(db), queueCounts(db)]);
  const names = [...new Set([...Object.keys(config.queues), ...known])].filter((name) => queueAllowed(scope, name)).sort();
  return names.map((name) =>
    queueView(config, name, resolveQueueLimits(config.queues[name], overrides.get(name)?.settings ?? null), counts.get(name) ?? NO_COUNTS),
  );
}

export async function describeQueue(config: Config, db: Db, name: string): Promise<QueueView> {
  const [override, counts] = await Promise.all([queueOverride(db, name), queueCounts(db, name)]);
  return queueView(config, name, resolveQueueLimits(config.queues[name], override?.settings ?? null), counts.get(name) ?? NO_COUNTS);
}

function queueView(config: Config, name: string, limits: EffectiveQueueLimits, counts: QueueCounts): QueueAnswer {
  const defaults = queueDefaults(config, name);
  const field = <T>(r: { value: T; source: Source }) => ({ value: r.value, source: r.source });
  return {
    name,
    concurrency: field(limits.concurrency),
    key_concurrency: field(limits.keyConcurrency),
    priority: field(limits.priority),
    paused: field(limits.paused),
    rate: field(limits.rate),
    key_rate: field(limits.keyRate),
    adaptive: field(limits.adaptive),
    adaptive_min: field(limits.adaptiveMin),
    pull: field(limits.pull),
    key_strategy: field(limits.keyStrategy),
    key_from: defaults.keyFrom,
    url: defaults.url,
    max_attempts: defaults.maxAttempts,
    lease_ms: defaults.leaseMs,
    timeout_ms: defaults.timeoutMs,
    counts,
  };
}

export interface SlotLevel {
  limit: number | null;
  source: Source;
  active: number;
}

/** A level's rate limit in force, and the grants still inside their period. */
export interface RateLevel {
  value: Rate | null;
  source: Source;
  used: number;
}

/**
 * A queue's or a key's level: `effective` is the limit the claim applies, `limit` or, on an
 * adaptive queue, the lower one it has learnt; `learnt` what its endpoint taught it (a hold too).
 */
export interface LearningLevel extends SlotLevel {
  effective: number | null;
  learnt: Learnt | null;
}

/** A queue's slots at every level and who holds them, on the database's clock (`now`). */
export interface ConcurrencyPicture {
  queue: string;
  now: Date;
  cluster: SlotLevel;
  adaptive: boolean;
  /** What an enqueue does to a key with unfinished tasks, and where that comes from. */
  keyStrategy: EffectiveQueueLimits['keyStrategy'];
  /** `waiting`: tasks waiting on children that hold a slot here (they did not lend it); the claim counts them with `active`. */
  queueLevel: LearningLevel & { paused: boolean; rate: RateLevel; waiting: number };
  /** Keys with a limit, a holder, a waiting task or something learnt, by name. */
  keys: Array<LearningLevel & { key: string; rate: RateLevel; waiting: number; holders: SlotHolder[] }>;
  keyless: SlotHolder[];
}

export async function concurrencyPicture(config: Config, db: Db, name: string): Promise<ConcurrencyPicture> {
  const [override, snapshot] = await Promise.all([queueOverride(db, name), concurrencySnapshot(db, name)]);
  const limits = resolveQueueLimits(config.queues[name], override?.settings ?? null);
  const byKey = new Map<string, SlotHolder[]>();
  const keyless: SlotHolder[] = [];
  for (const h of snapshot.holders) {
    if (h.concurrencyKey === null) keyless.push(h);
    else byKey.set(h.concurrencyKey, [...(byKey.get(h.concurrencyKey) ?? []), h]);
  }
  const waitingKeys = snapshot.waiting.flatMap((w) => (w.concurrencyKey === null ? [] : [w.concurrencyKey]));
  const learntKeys = [...snapshot.learnt.keys()].filter((k) => k !== '*');
  const keys = [...new Set([...byKey.keys(), ...snapshot.keyLimits.keys(), ...waitingKeys, ...learntKeys])].sort();
  const adaptive = limits.adaptive.value;
  // What a level learnt counts only on an adaptive queue, as in the claim.
  const learnt = (level: string) => (adaptive ? (snapshot.learnt.get(level)?.effective ?? null) : null);
  const floor = limits.adaptiveMin.value;
  const queueWaiting = snapshot.waiting.filter((w) => !w.lentQueue).length;
  // A window's grants inside their period; a bucket's tokens taken (burst less what it holds).
  const rateUsed = (rate: Rate | null, key: string) =>
    rate?.burst === undefined
      ? (snapshot.rateUsed.get(key) ?? 0)
      : rate.burst -
        Math.max(0, bucketRoom({ ...rate, burst: rate.burst }, snapshot.buckets.get(key)?.getTime() ?? null, snapshot.now.getTime()));
  return {
    queue: name,
    now: snapshot.now,
    cluster: { limit: config.clusterCap, source: config.clusterCap === null ? 'default' : 'env', active: snapshot.clusterActive },
    adaptive,
    keyStrategy: limits.keyStrategy,
    queueLevel: {
      limit: limits.concurrency.value,
      source: limits.concurrency.source,
      active: snapshot.holders.length,
      effective: learntLimit(limits.concurrency.value, learnt('*'), floor, queueWaiting),
      learnt: snapshot.learnt.get('*') ?? null,
      paused: limits.paused.value,
      rate: { ...limits.rate, used: rateUsed(limits.rate.value, '*') },
      waiting: queueWaiting,
    },
    keys: keys.map((key) => {
      const inputs = snapshot.keyLimits.get(key);
      const limit = resolveKeyLimit(key, inputs?.override ?? null, inputs?.taskLimit ?? null, limits.keyConcurrency);
      const rate = resolveKeyRate(key, inputs?.taskRate ?? null, limits.keyRate);
      const holders = byKey.get(key) ?? [];
      const waiting = snapshot.waiting.filter((w) => w.concurrencyKey === key && !w.lentKey).length;
      return {
        key,
        limit: limit.value,
        source: limit.source,
        active: holders.length,
        effective: learntLimit(limit.value, learnt(key), floor, waiting),
        learnt: snapshot.learnt.get(key) ?? null,
        rate: { ...rate, used: rateUsed(rate.value, key) },
        waiting,
        holders,
      };
    }),
    keyless,
  };
}

/** PUT /v1/queues/:queue: the fields given are overridden; `null` removes an override; others stay. */
export async function patchQueue(ops: OpsContext, name: string, patch: unknown): Promise<QueueView> {
  const parsed = queueSettingsPatchSchema.safeParse(patch);
  if (!parsed.success) throw new ValidationError(fieldIssues(parsed.error));
  await queueOverridePatch(ops.db, name, parsed.data);
  ops.poke();
  return describeQueue(ops.config, ops.db, name);
}

/** Removes every run-time override of a queue (404 when it has none). */
export async function resetQueue(ops: OpsContext, name: string): Promise<QueueView> {
  if (!(await queueOverrideDelete(ops.db, name))) throw new NotFoundError(`an override of queue ${name}`);
  ops.poke();
  return describeQueue(ops.config, ops.db, name);
}

export async function setPaused(ops: OpsContext, name: string, paused: boolean): Promise<QueueView> {
  await queueOverridePatch(ops.db, name, { paused });
  if (!paused) ops.poke();
  return describeQueue(ops.config, ops.db, name);
}

export async function setKeyLimit(ops: OpsContext, name: string, key: string, body: unknown): Promise<{ limit: number }> {
  const parsed = keyLimitSchema.safeParse(body);
  if (!parsed.success) throw new ValidationError(fieldIssues(parsed.error));
  await keyLimitPut(ops.db, name, key, parsed.data.limit);
  ops.poke();
  return { limit: parsed.data.limit };
}

/** Removes a key's run-time limit (404 when it has none). */
export async function clearKeyLimit(ops: OpsContext, name: string, key: string): Promise<void> {
  if (!(await keyLimitDelete(ops.db, name, key))) throw new NotFoundError(`a limit for key ${key} of queue ${name}`);
  ops.poke();
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Who holds a lease of the queue now, or `null`: it has ended, or is another queue's. */
export async function leaseHolderOf(db: Db, name: string, lease: string): Promise<SlotHolder | null> {
  return UUID.test(lease) ? leaseHolder(db, name, lease) : null;
}

/** An admin frees a stuck slot: returns the task whose lease it was (404 when no such lease is held). */
export async function releaseLease(ops: OpsContext, name: string, lease: string): Promise<string> {
  const taskId = UUID.test(lease) ? await leaseForceRelease(ops.db, name, lease) : null;
  if (!taskId) throw new NotFoundError(`a lease ${lease} held in queue ${name}`);
  ops.poke();
  return taskId;
}
