/**
 * Pull consumers (docs/DESIGN.md §3): a queue whose `pull` setting is true is consumed through
 * POST /v1/queues/:queue/lease instead of pushed. The one claim decides both (p_pull of
 * migrations/functions/claim.sql), so a pulled lease holds the same cluster, queue and key
 * slots, rates and turns as a pushed one, and ends the same way: the lease calls of
 * routes/leases.ts, or its expiry. A pull that finds nothing ready waits (a long poll) for a
 * poke that concerns its queue (core/wake.ts `WorkWaiters`), for the next due time, or for
 * its `wait_ms`, whichever comes first, and claims again.
 */
import type { Config } from '../config.ts';
import { ConflictError, type FieldIssue, ValidationError } from '../core/errors.ts';
import { resolveQueueLimits } from '../core/limits.ts';
import type { LeasedTask } from '../core/types.ts';
import type { Poke } from '../core/wake.ts';
import { taskClaimBatch } from '../db/claim.ts';
import type { Db } from '../db/db.ts';
import { nextDueInMs } from '../db/due.ts';
import type { NewTask } from '../db/new-task.ts';
import { queueOverride, queueOverrides } from '../db/queues.ts';
import { leasesTakeBack } from '../db/settle.ts';
import { HEADERS } from '../protocol/headers.ts';
import { attemptHeaders, leaseTokenFor, signedRequest } from '../push/sign.ts';
import type { Keyring } from '../security/keyring.ts';
import type { Answer, pulledTask } from './answers.ts';
import { bodyView } from './task-answers.ts';

/**
 * The shortest wait for a due time. The next-due probe covers every queue: a busy rate-limited
 * queue elsewhere, or an expired lease not reaped yet, would otherwise make an idle consumer
 * claim many times a second.
 */
const MIN_RECHECK_MS = 100;
/**
 * The shortest time between one pull's passes, however many pokes wake it: under a cluster cap a
 * lease's end anywhere wakes every waiting pull (core/wake.ts `pokeLeaseEnded`). Short, since an
 * enqueue's poke may be one of them.
 */
const PASS_GAP_MS = 25;

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
  // Every url-less task is checked against the overrides too: one may have turned `pull` off.
  const urlless = tasks.flatMap((t, i) => (t.url === null ? [i] : []));
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
  const limits = { max: request.max, clusterCap: ctx.config.clusterCap, queuesJson: ctx.config.claimQueuesJson, pull: queue };
  // The longest a waiting pull goes without claiming again, whatever pokes it missed: a slot the
  // dispatcher freed (its settles poke no one), a poke lost between instances.
  const recheckMs = ctx.config.pullRecheckMs;
  /** The wait under way, if it has not ended yet (a due time may have cut it short). */
  let waiting: Promise<'woken'> | null = null;
  let claimedAt = Number.NEGATIVE_INFINITY;
  for (;;) {
    const early = claimedAt + PASS_GAP_MS - Date.now();
    if (early > 0) await Promise.race([sleep(early), gone]);
    if (ctx.signal.aborted) return [];
    // Waiting from before the claim: a poke for work committed while it ran is not missed.
    const left = deadline - Date.now();
    if (waiting === null && left > 0) waiting = waitFor(ctx, queue, Math.min(left, recheckMs)).then(() => 'woken' as const);
    const woken = left > 0 ? waiting : null;
    claimedAt = Date.now();
    const tasks = await taskClaimBatch(ctx.db, limits);
    if (tasks.length > 0 && ctx.signal.aborted) {
      // The consumer left while the claim ran: nobody would hold these.
      await leasesTakeBack(ctx.db, tasks, 'the consumer left before its pull was answered');
      return [];
    }
    if (tasks.length > 0) {
      // No pusher holds these leases, and none may be awake to read when they end: an expiry
      // is the dispatcher's to reap (as a pushed lease's), so it is told when the first comes
      // (the lease's length travels, not the database's instant: core/wake.ts `pokeForTasks`).
      const leaseMs = Math.min(...tasks.map((t) => t.lease.expiresAt.getTime() - t.lease.leasedAt.getTime()));
      try {
        ctx.poke({ atMs: Date.now() + leaseMs, tasks: 0 });
        return await pulledViews(ctx, tasks, request.pushTo);
      } catch (error) {
        // Never answered, the leases would be held for nobody until they expire (an attempt
        // each): they go back first.
        await leasesTakeBack(ctx.db, tasks, 'the pull failed before it was answered');
        throw error;
      }
    }
    if (woken === null) return [];
    // Sooner than the recheck when something comes due before it (this queue's or not).
    const dueInMs = (await nextDueInMs(ctx.db)) ?? recheckMs;
    const due = dueInMs < recheckMs ? sleep(Math.max(MIN_RECHECK_MS, dueInMs)) : woken;
    if ((await Promise.race([woken, due, gone])) === 'woken') waiting = null;
  }
}

/** The platform's wait; one that fails (the Worker's scheduler restarting mid-call) is waited out on a timer. */
function waitFor(ctx: PullContext, queue: string, ms: number): Promise<void> {
  return ctx.awaitWork(queue, ms).catch(() => sleep(ms));
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Resolves when `signal` aborts (never, if it never does). */
function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

const LEASE_TOKEN = HEADERS.leaseToken.toLowerCase();

async function pulledViews(ctx: PullContext, tasks: readonly LeasedTask[], pushTo: string | undefined) {
  const { config } = ctx;
  const keyring = await ctx.keyring();
  const signing = {
    keyring,
    issuer: config.issuer,
    webhookSecret: config.webhookSecret,
    webhookSecretNext: config.webhookSecretNext,
    maxLeaseMs: config.maxLeaseMs,
    // Never a production push: signed so that only a receiver that accepts forwarded pushes takes it.
    forwarded: true,
  };
  const nowMs = Date.now();
  return Promise.all(
    tasks.map(async (task): Promise<Answer<typeof pulledTask>> => {
      // A push made for `push_to` carries the lease's token already: signed once.
      const push = pushTo === undefined ? null : await signedRequest(task, pushTo, signing, nowMs);
      const token = push?.headers[LEASE_TOKEN] ?? (await leaseTokenFor(task, signing));
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
