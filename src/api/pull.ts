/**
 * Pull consumers (docs/DESIGN.md §3): a queue whose `pull` setting is true is consumed through
 * POST /v1/queues/:queue/lease instead of pushed. The one claim decides both (p_pull of
 * migrations/functions/claim.sql), so a pulled lease holds the same cluster, queue and key
 * slots, rates and turns as a pushed one, and ends the same way: the lease calls of
 * routes/leases.ts, or its expiry. A pull that finds nothing ready waits (a long poll) for a
 * poke that concerns its queue (core/wake.ts `WorkWaiters`), for the next due time, or for
 * its `wait_ms`, whichever comes first, and claims again.
 */
import { type Config, claimQueuesJson } from '../config.ts';
import { ConflictError, type FieldIssue, ValidationError } from '../core/errors.ts';
import { resolveQueueLimits } from '../core/limits.ts';
import type { LeasedTask } from '../core/types.ts';
import type { Poke } from '../core/wake.ts';
import { taskClaimBatch } from '../db/claim.ts';
import type { Db } from '../db/db.ts';
import { nextDueInMs } from '../db/due.ts';
import type { NewTask } from '../db/enqueue.ts';
import { queueOverride, queueOverrides } from '../db/queues.ts';
import { attemptHeaders, signedRequest } from '../dispatcher/push.ts';
import type { Keyring } from '../security/keyring.ts';
import { signLeaseToken } from '../security/lease-token.ts';
import type { Answer, pulledTask } from './answers.ts';
import { bodyView } from './views.ts';

/**
 * The longest a waiting pull goes without claiming again, whatever pokes it missed: a slot the
 * dispatcher freed (its settles poke no one), a poke lost between instances.
 */
const RECHECK_MS = 1_000;
/** The shortest: a due time already passed (an expired lease not reaped yet) is not spun on. */
const MIN_RECHECK_MS = 20;

/** Whether `queue` is consumed by pulling: its run-time override, else SLUICE_QUEUES. */
export async function isPulled(db: Db, config: Config, queue: string): Promise<boolean> {
  const override = await queueOverride(db, queue);
  return resolveQueueLimits(config.queues[queue], override?.settings ?? null).pull.value;
}

/**
 * Refuses tasks without a url bound for queues that are pushed: only a pull queue's tasks may
 * name none. `pathOf(i)` is where the i-th task's url is in the request (`url`, `tasks.3.url`).
 */
export async function requireUrlOrPull(
  db: Db,
  config: Config,
  tasks: readonly Pick<NewTask, 'queue' | 'url'>[],
  pathOf: (i: number) => string,
): Promise<void> {
  const urlless = tasks.flatMap((t, i) => (t.url === null && config.queues[t.queue]?.pull !== true ? [i] : []));
  if (urlless.length === 0) return;
  const overrides = await queueOverrides(db);
  const issues: FieldIssue[] = [];
  for (const i of urlless) {
    const queue = tasks[i]!.queue;
    if (resolveQueueLimits(config.queues[queue], overrides.get(queue)?.settings ?? null).pull.value) continue;
    issues.push({
      path: pathOf(i),
      message: `is required: queue "${queue}" has no default url and is not a pull queue (set "pull": true to consume it by pulling)`,
    });
  }
  if (issues.length > 0) throw new ValidationError(issues);
}

export interface PullContext {
  db: Db;
  config: Config;
  keyring: () => Promise<Keyring>;
  /** Resolves at a poke that concerns `queue`, or after `ms` (the platform's waiters). */
  awaitWork: (queue: string, ms: number) => Promise<void>;
  /** The request's: a consumer gone while its pull waited leases nothing. */
  signal: AbortSignal;
  /** Tells the dispatcher when the leases end, so that an abandoned one is reaped on time. */
  poke: (poke: Poke) => void;
}

export interface PullRequest {
  max: number;
  waitMs: number;
  pushTo: string | undefined;
}

/** Leases up to `max` ready tasks of a pull queue, waiting up to `waitMs` for one. */
export async function pullTasks(ctx: PullContext, queue: string, request: PullRequest): Promise<Answer<typeof pulledTask>[]> {
  if (!(await isPulled(ctx.db, ctx.config, queue))) {
    throw new ConflictError(
      409,
      'not_pulled',
      `queue "${queue}" is pushed, not pulled: set "pull": true (PUT /v1/queues/${queue}) to consume it by pulling`,
    );
  }
  const deadline = Date.now() + request.waitMs;
  // One listener for the whole poll (not one per wait: Node warns past ten on a signal).
  const gone = aborted(ctx.signal);
  const limits = { max: request.max, clusterCap: ctx.config.clusterCap, queuesJson: claimQueuesJson(ctx.config), pull: queue };
  for (;;) {
    if (ctx.signal.aborted) return [];
    const tasks = await taskClaimBatch(ctx.db, limits);
    if (tasks.length > 0) {
      // No pusher holds these leases, and none may be awake to read when they end: an expiry
      // is the dispatcher's to reap (as a pushed lease's), so it is told when the first comes
      // (the lease's length travels, not the database's instant: core/wake.ts `pokeForTasks`).
      const leaseMs = Math.min(...tasks.map((t) => t.lease.expiresAt.getTime() - t.lease.leasedAt.getTime()));
      ctx.poke({ atMs: Date.now() + leaseMs, tasks: 0 });
      return pulledViews(ctx, tasks, request.pushTo);
    }
    const left = deadline - Date.now();
    if (left <= 0) return [];
    const dueInMs = (await nextDueInMs(ctx.db)) ?? RECHECK_MS;
    const waitMs = Math.min(left, Math.max(MIN_RECHECK_MS, Math.min(dueInMs, RECHECK_MS)));
    // A wait that fails (the Worker's scheduler restarting mid-call) is waited out on a timer.
    const woken = ctx.awaitWork(queue, waitMs).catch(() => new Promise<void>((resolve) => setTimeout(resolve, waitMs)));
    await Promise.race([woken, gone]);
  }
}

/** Resolves when `signal` aborts (never, if it never does). */
function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

async function pulledViews(ctx: PullContext, tasks: readonly LeasedTask[], pushTo: string | undefined) {
  const { config } = ctx;
  const keyring = await ctx.keyring();
  const signing = {
    keyring,
    issuer: config.issuer,
    webhookSecret: config.webhookSecret,
    webhookSecretNext: config.webhookSecretNext,
    maxLeaseMs: config.maxLeaseMs,
  };
  const nowMs = Date.now();
  return Promise.all(
    tasks.map(async (task): Promise<Answer<typeof pulledTask>> => {
      const [token, push] = await Promise.all([
        signLeaseToken(
          keyring,
          { taskId: task.id, leaseId: task.lease.id },
          task.lease.leasedAt.getTime() + config.maxLeaseMs,
          config.issuer,
        ),
        pushTo === undefined ? null : signedRequest(task, pushTo, signing, nowMs),
      ]);
      return {
        id: task.id,
        queue: task.queue,
        concurrency_key: task.concurrencyKey,
        attempt: task.attempts,
        max_attempts: task.maxAttempts,
        resumes: task.resumes,
        ...bodyView(task),
        content_type: task.body === null ? null : task.contentType,
        headers: { ...attemptHeaders(task) },
        lease: { id: task.lease.id, token, expires_at: task.lease.expiresAt.toISOString() },
        ...(push
          ? {
              push: {
                url: push.url,
                method: task.method,
                headers: { ...push.headers },
                body_text: push.body === null ? null : (task.body ?? ''),
              },
            }
          : {}),
      };
    }),
  );
}
