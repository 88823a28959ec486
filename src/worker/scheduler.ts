/**
 * The scheduler: one Durable Object per deployment holding the deployment's one alarm, set to
 * the next due time (docs/DESIGN.md §6). It never ticks and never touches Postgres: pokes move the
 * alarm earlier (the API's, for work due now or at an enqueued task's `run_at`; each idle
 * shard's, for the next due time it read), and when the alarm fires it wakes as many pusher
 * shards as the announced work needs. The cron asks it every minute (`tick`), so a lost alarm
 * costs at most a minute. Since every poke and every shard's end reaches it, it knows when work
 * was last seen and when the next is due: past `SLUICE_REST_AFTER_MS` without work, with nothing
 * due, the deployment is at rest (core/rest.ts) and the cron sends Postgres nothing. It also holds
 * the pulls waiting for work (api/pull.ts): a poke for now wakes those of its queues, the alarm all
 * of them.
 */
import { DurableObject } from 'cloudflare:workers';
import { type Env, loadConfig } from '../config.ts';
import { atRest } from '../core/rest.ts';
import { type Poke, shardsToWake, WorkWaiters } from '../core/wake.ts';
import { pusherOf, type SchedulerRpc } from './bindings.ts';

/** When work was last seen, in storage: an evicted scheduler must not believe it has rested for ever. */
const LAST_WORK_KEY = 'lastWorkMs';
/** Work seen this soon after the stored time is not written again. */
const LAST_WORK_WRITE_MS = 10_000;

export class Scheduler extends DurableObject<Env> implements SchedulerRpc {
  /** Tasks announced as due now since the alarm last fired (kept in memory: a hint only). */
  #announced = 0;
  #waiters = new WorkWaiters();
  /** When work was last seen (epoch ms); read from storage once. */
  #lastWorkMs: number | null = null;

  /** Work comes due at `poke.atMs`: the alarm moves there if that is earlier; never later. */
  async poke(poke: Poke): Promise<void> {
    if (poke.atMs <= Date.now()) this.#announced += poke.tasks;
    this.#waiters.wake(poke, Date.now());
    await this.#worked();
    await this.#dueAt(poke.atMs);
  }

  /**
   * A shard's run ended: whether it did work (claimed, reaped, fired), and when the next thing is
   * due as it read it (`null`: nothing waits on time).
   */
  async ran(worked: boolean, atMs: number | null): Promise<void> {
    if (worked) await this.#worked();
    if (atMs !== null) await this.#dueAt(atMs);
  }

  /**
   * The cron's minute: at rest, nothing (and the cron sends Postgres nothing); else the alarm is
   * set for now, which repairs a lost one, and the cron does its chores. Says whether at rest.
   */
  async tick(): Promise<{ resting: boolean }> {
    const config = loadConfig(this.env);
    const now = Date.now();
    // Never stored (a new deployment): it has had no time to rest yet.
    this.#lastWorkMs ??= (await this.ctx.storage.get<number>(LAST_WORK_KEY)) ?? now;
    if (atRest({ lastWorkMs: this.#lastWorkMs, nextDueAtMs: await this.ctx.storage.getAlarm() }, now, config.restAfterMs))
      return { resting: true };
    await this.#dueAt(now);
    return { resting: false };
  }

  awaitWork(queue: string, ms: number): Promise<void> {
    return this.#waiters.wait(queue, ms);
  }

  /**
   * Wakes shards 0…n-1 (a poke arriving meanwhile sets a new alarm, which runs after this one).
   * Shards that are busy already just run once more; shards that find more than they can push
   * wake the next ones themselves.
   */
  async #dueAt(atMs: number): Promise<void> {
    // Storage calls keep the input gate shut: no other poke interleaves between get and set.
    const current = await this.ctx.storage.getAlarm();
    if (current === null || atMs < current) await this.ctx.storage.setAlarm(atMs);
  }

  async #worked(): Promise<void> {
    const now = Date.now();
    const stored = this.#lastWorkMs;
    this.#lastWorkMs = now;
    if (stored === null || now - stored >= LAST_WORK_WRITE_MS) await this.ctx.storage.put(LAST_WORK_KEY, now);
  }

  async alarm(): Promise<void> {
    const config = loadConfig(this.env);
    const shards = shardsToWake(this.#announced, config.dispatchParallelism, config.dispatchShards);
    this.#announced = 0;
    this.#waiters.wakeAll();
    await Promise.all(Array.from({ length: shards }, (_, i) => pusherOf(this.env, i).wake(i)));
  }
}
