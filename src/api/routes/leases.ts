/**
 * /v1/leases/:lease: the calls of an endpoint that keeps its lease (`Sluice-Ack: lease`):
 * heartbeat, complete, fail, release. Authorized by the push's `Sluice-Lease-Token`, good for
 * that one lease only. Every write is a compare-and-set on the lease: a lease that expired,
 * was reclaimed or finished answers 409 `lease_lost` (or `cancelled`) and changes nothing.
 */
import { type Context, Hono } from 'hono';
import { createMiddleware } from 'hono/factory';
import type { z } from 'zod';
import { ConflictError, ForbiddenError, type SluiceError, UnauthorizedError, ValidationError } from '../../core/errors.ts';
import { fieldIssues } from '../../core/issues.ts';
import { type LeaseCall, settleLeaseCall } from '../../core/lease.ts';
import { storable } from '../../core/text.ts';
import { LIMITS, type Task, type TaskStatus } from '../../core/types.ts';
import { pokeLeaseEnded } from '../../core/wake.ts';
import type { Db } from '../../db/db.ts';
import { leaseFind, leaseHeartbeat } from '../../db/leases.ts';
import { leaseSettleReport } from '../../db/settle.ts';
import { leaseWait } from '../../db/waits.ts';
import { verifyLeaseToken } from '../../security/lease-token.ts';
import type { Answer, leaseEnded, leaseExtended, leaseWaiting } from '../answers.ts';
import { readJson } from '../body.ts';
import type { AppEnv } from '../context.ts';
import { completeSchema, failSchema, heartbeatSchema, releaseSchema, waitSchema } from '../schemas/calls.ts';

export const leases = new Hono<AppEnv>();

const requireLeaseToken = createMiddleware<AppEnv>(async (c, next) => {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header('authorization') ?? '');
  if (!match?.[1]) throw new UnauthorizedError('send the push\'s lease token: "Authorization: Bearer <Sluice-Lease-Token>"');
  const claims = await verifyLeaseToken(await c.var.keyring(), match[1], c.var.config.issuer, Date.now());
  if (!claims) throw new UnauthorizedError('the lease token is not valid (or has expired)');
  if (claims.leaseId !== c.req.param('lease')) throw new ForbiddenError('this lease (the token is for another one)');
  c.set('leaseTaskId', claims.taskId);
  await next();
});

leases.use('/:lease/*', requireLeaseToken);

leases.post('/:lease/heartbeat', async (c) => {
  const body = parse(heartbeatSchema, await readOptionalJson(c.req.raw));
  const leaseId = c.req.param('lease');
  const found = await leaseFind(c.var.db, c.var.leaseTaskId, leaseId);
  if (!found?.current) throw lostOrCancelled(found?.task ?? null);
  const { task } = found;
  const result = await leaseHeartbeat(c.var.db, task.id, leaseId, body.extend_ms ?? task.leaseMs, c.var.config.maxLeaseMs);
  if (result.ok) {
    return c.json({ lease_id: leaseId, task_id: task.id, expires_at: result.expiresAt.toISOString() } satisfies Answer<
      typeof leaseExtended
    >);
  }
  // Not extended. A cancellation asked for ends the lease now (the slot is free at once);
  // otherwise the lease expired, reached its maximum, or was lost meanwhile.
  if (task.cancelRequestedAt !== null) {
    await endLease(c.var.db, task, leaseId, { kind: 'cancelled' });
    c.var.poke(pokeLeaseEnded(Date.now(), task.queue, c.var.config.clusterCap));
    throw new ConflictError(409, 'cancelled', `task ${task.id} was cancelled: stop the work`);
  }
  throw lostOrCancelled((await leaseFind(c.var.db, task.id, leaseId))?.task ?? null, 'the lease expired or reached its maximum length');
});

leases.post('/:lease/complete', async (c) => {
  const body = parse(completeSchema, await readOptionalJson(c.req.raw));
  let result: string | null;
  try {
    result = body.result === undefined ? null : typeof body.result === 'string' ? body.result : JSON.stringify(body.result);
  } catch {
    throw new ValidationError([{ path: 'result', message: 'is nested too deeply' }]);
  }
  if (result !== null && new TextEncoder().encode(result).length > LIMITS.resultBytes) {
    throw new ValidationError([{ path: 'result', message: `is larger than ${LIMITS.resultBytes} bytes` }]);
  }
  return callEndingLease(c, { kind: 'complete', result: result === null ? null : storable(result) });
});

leases.post('/:lease/fail', async (c) => {
  const body = parse(failSchema, await readOptionalJson(c.req.raw));
  return callEndingLease(c, { kind: 'fail', error: body.error, retry: body.retry, retryAfterMs: body.retry_after_ms ?? null });
});

leases.post('/:lease/release', async (c) => {
  const body = parse(releaseSchema, await readOptionalJson(c.req.raw));
  return callEndingLease(c, { kind: 'release', delayMs: body.delay_ms ?? 0 });
});

/**
 * Wait for children: the lease ends, the task is `waiting`, and once every child waited on has
 * finished it is pushed again (`Sluice-Resume`), its attempt given back. 409
 * `recursive_wait_deadlock` when the wait could never be served (docs/guide.md "Waits").
 */
leases.post('/:lease/wait', async (c) => {
  const body = parse(waitSchema, await readOptionalJson(c.req.raw));
  const leaseId = c.req.param('lease');
  const taskId = c.var.leaseTaskId;
  const result = await leaseWait(c.var.db, taskId, leaseId, body.children ?? null, c.var.config.claimQueuesJson);
  switch (result.kind) {
    case 'waiting':
      // Its cluster slot (and any slot it lent) is free now, and its children may be done already.
      c.var.poke();
      return c.json({
        task_id: taskId,
        status: 'waiting',
        waiting_on: result.waitingOn,
        lent_queue: result.lentQueue,
        lent_key: result.lentKey,
      } satisfies Answer<typeof leaseWaiting>);
    case 'lease_lost':
      throw lostOrCancelled((await leaseFind(c.var.db, taskId, leaseId))?.task ?? null);
    case 'not_children':
      throw new ValidationError([
        { path: 'children', message: `names tasks that are not children of task ${taskId}: ${result.ids.join(', ')}` },
      ]);
    case 'cancelled':
      throw new ConflictError(409, 'cancelled', `task ${taskId} was cancelled: end the lease (fail) instead of waiting`);
    case 'deadlock': {
      // The waiter, then each task it would wait on through a shut level or a waiting child, back to it.
      const chain = [...result.chain, result.chain[0]!].map((t) => `${t.id} (${t.queue}${t.key === null ? '' : `/${t.key}`})`).join(' → ');
      const level = result.level === 'queue' ? `queue ${result.queue}` : `key ${result.key} of queue ${result.queue}`;
      throw new ConflictError(
        409,
        'recursive_wait_deadlock',
        `waiting would never end: a child needs a slot of ${level} (limit ${result.limit}), all held by waiting tasks, and the chain ${chain} would each wait on the next: raise the limit, or put the child on another queue`,
      );
    }
  }
});

type LeaseContext = Context<AppEnv, '/:lease/*'>;

async function callEndingLease(c: LeaseContext, call: LeaseCall): Promise<Response> {
  const leaseId = c.req.param('lease') as string;
  // `complete` repeated on the lease that completed the task (even concurrently): the same answer.
  const repeated = (found: Awaited<ReturnType<typeof leaseFind>>) =>
    found && !found.current && call.kind === 'complete' && found.task.status === 'succeeded'
      ? c.json({ task_id: found.task.id, status: 'succeeded', repeated: true } satisfies Answer<typeof leaseEnded>)
      : null;
  const found = await leaseFind(c.var.db, c.var.leaseTaskId, leaseId);
  const again = repeated(found);
  if (again) return again;
  if (!found) throw lostOrCancelled(null);
  // A lease no longer held may have been ended by this very call, sent again because its answer
  // was lost: the settle finds the ending it wrote and answers it as a repeat, changing nothing.
  const ended = await endLease(c.var.db, found.task, leaseId, call, c.var.config.endpointPauseAfter);
  if (ended?.repeated) return c.json({ task_id: found.task.id, status: ended.status, repeated: true } satisfies Answer<typeof leaseEnded>);
  if (ended) {
    c.var.poke(pokeLeaseEnded(Date.now(), found.task.queue, c.var.config.clusterCap));
    return c.json({ task_id: found.task.id, status: ended.status } satisfies Answer<typeof leaseEnded>);
  }
  const now = await leaseFind(c.var.db, c.var.leaseTaskId, leaseId);
  const raced = repeated(now);
  if (raced) return raced;
  throw lostOrCancelled(now?.task ?? null);
}

/**
 * Ends a held lease by a lease call: the task's status after, or `null` when the lease was no
 * longer held and unexpired; `repeated` when this same call had ended it already.
 */
async function endLease(
  db: Db,
  task: Task,
  leaseId: string,
  call: LeaseCall,
  endpointPauseAfter = 0,
): Promise<{ status: TaskStatus; repeated: boolean } | null> {
  const settlement = settleLeaseCall(task, call, Date.now(), Math.random());
  const held = task.lease?.id === leaseId ? task.lease : null;
  // A push answered 2xx with `Sluice-Ack: lease` says nothing to its origin's health when it is
  // answered (no statement is sent then); its handler's `complete` says it, as a 2xx would have:
  // it ends a run of failures, and a probe so answered resumes its paused origin.
  const health =
    call.kind === 'complete' && task.url !== null
      ? {
          signal: null,
          queue: task.queue,
          concurrencyKey: task.concurrencyKey,
          deferrals: task.deferrals,
          url: task.url,
          health: 'ok' as const,
          pauseAfter: endpointPauseAfter,
        }
      : null;
  const report = await leaseSettleReport(
    db,
    [
      {
        taskId: task.id,
        leaseId,
        leasedAt: held?.leasedAt ?? null,
        attempt: task.attempts,
        settlement,
        durationMs: null,
        require: 'unexpired',
        ...(health ? { signal: health } : {}),
      },
    ],
    [],
    false,
    Date.now(),
  );
  return report.items[0] ?? null;
}

function lostOrCancelled(task: Task | null, why = 'the lease is no longer held'): SluiceError {
  if (task?.status === 'cancelled') return new ConflictError(409, 'cancelled', `task ${task.id} was cancelled`);
  return new ConflictError(409, 'lease_lost', `${why}: it expired, was reclaimed or has ended; change nothing`);
}

function readOptionalJson(request: Request): Promise<unknown> {
  return readJson(request, LIMITS.requestBytes, { empty: {} });
}

function parse<T extends z.ZodType>(schema: T, value: unknown): z.infer<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new ValidationError(fieldIssues(parsed.error));
  return parsed.data;
}
