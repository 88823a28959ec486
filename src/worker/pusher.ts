/**
 * A pusher shard: a Durable Object that drains due work in its own alarm invocations, each with
 * its own connection budget (6 requests waiting for headers) and subrequest budget. A drain is
 * reap → claim → push → settle, on one database connection kept for the length of the drain
 * (and a few seconds after); while it finds work it re-arms itself at once, and when idle it
 * tells the scheduler when the next thing comes due. Limits stay exact: every claim is decided
 * in Postgres, whichever shard makes it.
 */
import { DurableObject } from 'cloudflare:workers';
import { describeLimits, type Env, loadConfig } from '../config.ts';
import { isStall, nextShard, wakeAt } from '../core/wake.ts';
import type { OpenDb } from '../db/db.ts';
import { openDispatchDb } from '../db/workers.ts';
import { Chores } from '../dispatcher/chores.ts';
import { didWork } from '../dispatcher/report.ts';
import { dispatchRun } from '../dispatcher/run.ts';
import { DUE_EVENT } from '../dispatcher/run-options.ts';
import { loadKeyring } from '../security/keyring.ts';
import { type PusherRpc, pusherOf, schedulerOf } from './bindings.ts';

/** One alarm invocation's wall-clock budget for claiming; far inside the 15 min an alarm may run. */
const RUN_BUDGET_MS = 25_000;
/** Subrequests kept back from each invocation's pushes: the database connection and its retries. */
const SUBREQUEST_RESERVE = 10;
/**
 * How long an idle shard keeps its database connection: work arriving soon after (a lease
 * ended, a retry due) then costs no connection handshake. A connection pins the object in
 * memory, so not for long; an evicted object's connection simply goes with it.
 */
const LINGER_MS = 10_000;
/**
 * How long an idle drain waits for more work before its invocation ends (dispatcher/run.ts
 * `lingerMs`): a task enqueued meanwhile is claimed at once, on the open connection, without
 * the scheduler's alarm and a new invocation; a retry due meanwhile is claimed as it comes due.
 */
const RUN_LINGER_MS = 2_000;
/** How often a shard that keeps finding work says so to the scheduler (which rests only without work). */
const WORKED_REPORT_MS = 30_000;

let limitsLogged = false;

export class Pusher extends DurableObject<Env> implements PusherRpc {
  #index: number | undefined;
  #db: OpenDb | null = null;
  #closing: ReturnType<typeof setTimeout> | null = null;
  /** Idle runs in a row that claimed nothing yet read work due now (core/wake.ts `isStall`). */
  #stalls = 0;
  /** Tells a drain in progress that more work came due. */
  #nudges = new EventTarget();
  /** When `wake` was last called: a drain whose last claim was sent after it has served it. */
  #lastWakeMs = 0;
  /** Shard 0's sweeps (the cron sweeps once a minute; at volume, buckets turn faster). */
  #chores: Chores | null = null;
  /** When this shard last told the scheduler it worked, in a drain of many invocations. */
  #reportedWorkMs = 0;

  /**
   * Starts a drain as soon as possible, and tells a drain in progress to claim again now (it
   * may be waiting on slow pushes with places free); returns at once.
   */
  async wake(index: number): Promise<void> {
    this.#lastWakeMs = Date.now();
    this.#nudges.dispatchEvent(new Event(DUE_EVENT));
    // A shard whose connection has closed opens one now: its handshakes overlap the alarm's
    // start instead of delaying the first claim (the first task after a rest).
    if (this.#db === null) {
      this.#db = openDispatchDb(loadConfig(this.env));
      this.#db.warm?.();
    }
    if (this.#index !== index) {
      this.#index = index;
      await this.ctx.storage.put('index', index);
    }
    const current = await this.ctx.storage.getAlarm();
    const now = Date.now();
    if (current === null || current > now) await this.ctx.storage.setAlarm(now);
  }

  async alarm(): Promise<void> {
    const config = loadConfig(this.env);
    if (!limitsLogged) {
      limitsLogged = true;
      console.info(`sluice dispatcher: ${describeLimits(config, 'worker')}`);
    }
    if (this.#closing) clearTimeout(this.#closing);
    this.#closing = null;
    this.#index ??= (await this.ctx.storage.get<number>('index')) ?? 0;
    const index = this.#index;
    this.#db ??= openDispatchDb(config);
    let recruited: Promise<void> | null = null;
    let report: Awaited<ReturnType<typeof dispatchRun>>;
    try {
      report = await dispatchRun(
        { db: this.#db, config, keyring: await loadKeyring(config.signingKeys) },
        {
          budgetMs: RUN_BUDGET_MS,
          maxPushes: config.maxSubrequests - SUBREQUEST_RESERVE,
          nudges: this.#nudges,
          lingerMs: RUN_LINGER_MS,
          // More claimable work than this shard can push at once: bring in the next shard.
          onBusy: () => {
            const next = nextShard(index, config.dispatchShards);
            if (next === null) return;
            const waking = pusherOf(this.env, next).wake(next);
            recruited = recruited === null ? waking : Promise.all([recruited, waking]).then(() => {});
          },
        },
      );
    } catch (error) {
      // The platform retries a failed alarm with backoff; the cron is the net beneath that.
      await this.#closeDb();
      throw error;
    } finally {
      await (recruited as Promise<void> | null)?.catch((e: unknown) => console.error('sluice: waking a pusher shard failed', e));
    }
    if (index === 0) {
      this.#chores ??= new Chores(config);
      await this.#chores.runDue(this.#db, Date.now(), ['sweep']);
    }
    const scheduler = schedulerOf(this.env);
    if (report.more) {
      // A fresh invocation: fresh subrequest and CPU budgets, the same connection.
      await this.ctx.storage.setAlarm(Date.now());
      if (Date.now() - this.#reportedWorkMs >= WORKED_REPORT_MS) {
        this.#reportedWorkMs = Date.now();
        await scheduler.ran(true, null);
      }
      return;
    }
    // A wake the drain heard and served (its last claim was sent after it) set an alarm for
    // nothing: another invocation would only find the same nothing.
    if (report.lastClaimAtMs !== null && this.#lastWakeMs < report.lastClaimAtMs) await this.ctx.storage.deleteAlarm();
    this.#closing = setTimeout(() => void this.#closeDb(), LINGER_MS);
    this.#stalls = isStall(report) ? this.#stalls + 1 : 0;
    const atMs = wakeAt(report, Date.now(), Number.POSITIVE_INFINITY, this.#stalls);
    this.#reportedWorkMs = Date.now();
    await scheduler.ran(didWork(report), Number.isFinite(atMs) ? atMs : null);
  }

  async #closeDb(): Promise<void> {
    const db = this.#db;
    this.#db = null;
    await db?.close().catch(() => {});
  }
}
