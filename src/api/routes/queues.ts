/**
 * /v1/queues: effective settings and where each comes from, run-time overrides (which win
 * over SLUICE_QUEUES until removed), per-key limits, pause/resume, who holds the slots, and
 * an admin's release of a stuck lease. The work itself is in queue-ops.ts, shared with the dashboard.
 */
import { type Context, Hono } from 'hono';
import { ValidationError } from '../../core/errors.ts';
import { fieldIssues } from '../../core/issues.ts';
import { LIMITS } from '../../core/types.ts';
import type { SlotHolder } from '../../db/queues.ts';
import { forwardTargetProblem } from '../../security/forwarding.ts';
import type { Answer, forcedRelease, keyLimit, pulled, queueConcurrency, queueList } from '../answers.ts';
import { requireScope } from '../auth.ts';
import { readJson } from '../body.ts';
import type { AppEnv } from '../context.ts';
import { pullTasks } from '../pull.ts';
import { requireQueue } from '../queue-access.ts';
import {
  clearKeyLimit,
  concurrencyKey,
  concurrencyPicture,
  describeQueue,
  type LearningLevel,
  listQueues,
  patchQueue,
  queueName,
  releaseLease,
  resetQueue,
  setKeyLimit,
  setPaused,
} from '../queue-ops.ts';
import { pullSchema } from '../schemas/calls.ts';

export const queues = new Hono<AppEnv>();

queues.get('/', requireScope('tasks:read'), async (c) =>
  c.json({ queues: await listQueues(c.var.config, c.var.db, c.var.queueScope) } satisfies Answer<typeof queueList>),
);

/** The `:queue` of the path: a queue name (else 400) that the caller's key may use (else 403, api/queue-access.ts). */
function queueParam(c: Context<AppEnv>): string {
  const name = queueName(c.req.param('queue') ?? '');
  requireQueue(c.var.queueScope, name);
  return name;
}

queues.get('/:queue', requireScope('tasks:read'), async (c) => {
  const name = queueParam(c);
  return c.json(await describeQueue(c.var.config, c.var.db, name));
});

queues.put('/:queue', requireScope('admin'), async (c) => {
  const name = queueParam(c);
  return c.json(await patchQueue(c.var, name, await readJson(c.req.raw, LIMITS.requestBytes)));
});

queues.delete('/:queue', requireScope('admin'), async (c) => c.json(await resetQueue(c.var, queueParam(c))));

for (const [action, paused] of [
  ['pause', true],
  ['resume', false],
] as const) {
  queues.post(`/:queue/${action}`, requireScope('admin'), async (c) => c.json(await setPaused(c.var, queueParam(c), paused)));
}

/** A pull consumer leases up to `max` ready tasks of a pull queue, waiting up to `wait_ms` for one (api/pull.ts). */
queues.post('/:queue/lease', requireScope('tasks:pull'), async (c) => {
  const name = queueParam(c);
  const parsed = pullSchema.safeParse(await readJson(c.req.raw, LIMITS.requestBytes, { empty: {} }));
  if (!parsed.success) throw new ValidationError(fieldIssues(parsed.error));
  const pushTo = parsed.data.push_to;
  const forwardProblem = pushTo === undefined ? null : forwardTargetProblem(pushTo, c.var.forwardTo);
  if (forwardProblem) throw new ValidationError([{ path: 'push_to', message: forwardProblem }]);
  const tasks = await pullTasks({ ...c.var, signal: c.req.raw.signal }, name, {
    max: parsed.data.max,
    waitMs: parsed.data.wait_ms,
    pushTo,
  });
  return c.json({ tasks } satisfies Answer<typeof pulled>);
});

queues.put('/:queue/keys/:key', requireScope('admin'), async (c) => {
  const name = queueParam(c);
  const key = concurrencyKey(c.req.param('key'));
  const { limit } = await setKeyLimit(c.var, name, key, await readJson(c.req.raw, LIMITS.requestBytes));
  return c.json({ queue: name, key, limit, source: 'override' } satisfies Answer<typeof keyLimit>);
});

queues.delete('/:queue/keys/:key', requireScope('admin'), async (c) => {
  await clearKeyLimit(c.var, queueParam(c), concurrencyKey(c.req.param('key')));
  return c.body(null, 204);
});

queues.get('/:queue/concurrency', requireScope('tasks:read'), async (c) => {
  const p = await concurrencyPicture(c.var.config, c.var.db, queueParam(c));
  const slots = (holders: readonly SlotHolder[]) =>
    holders.map((h) => ({
      task_id: h.taskId,
      lease_id: h.leaseId,
      leased_at: h.leasedAt.toISOString(),
      expires_at: h.expiresAt.toISOString(),
    }));
  const learnt = <L extends LearningLevel>({ learnt, ...l }: L) => ({
    ...l,
    held_until: learnt?.heldUntil && learnt.heldUntil > p.now ? learnt.heldUntil.toISOString() : null,
    last_move: learnt?.reason && learnt.movedAt ? { reason: learnt.reason, at: learnt.movedAt.toISOString() } : null,
  });
  return c.json({
    queue: p.queue,
    cluster: p.cluster,
    adaptive: p.adaptive,
    key_strategy: { value: p.keyStrategy.value, source: p.keyStrategy.source },
    queue_level: learnt(p.queueLevel),
    keys: p.keys.map(({ holders, ...k }) => ({ ...learnt(k), slots: slots(holders) })),
    keyless: { active: p.keyless.length, slots: slots(p.keyless) },
  } satisfies Answer<typeof queueConcurrency>);
});

queues.post('/:queue/leases/:lease/release', requireScope('admin'), async (c) => {
  const lease = c.req.param('lease');
  const taskId = await releaseLease(c.var, queueParam(c), lease);
  return c.json({ released: true, task_id: taskId, lease_id: lease } satisfies Answer<typeof forcedRelease>);
});
