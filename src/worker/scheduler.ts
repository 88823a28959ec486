/**
 * The scheduler: one Durable Object per deployment holding the deployment's one alarm, set to
 * the next due time (docs/DESIGN.md §6). It never ticks and never touches Postgres: a poke for
 * now wakes as many pusher shards as the announced work needs at once; a poke for later moves
 * the alarm earlier (the API's, at an enqueued task's `run_at`; each idle shard's, for the next
 * due time it read), and when the alarm fires it wakes the shards. The cron asks it every minute (`tick`), so a lost alarm
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
  /** A round of shard wakes under way; pokes for now that come meanwhile make one more after it. */
  #waking: Promise<void> | null = null;
  #wakeAgain = false;

  /**
   * Work comes due at `poke.atMs`: now, and the shards are woken at once (an alarm would add its
   * own delay to every enqueue's push); later, and the alarm moves there if that is earlier.
   */
  async poke(poke: Poke): Promise<void> {
    const now = Date.now();
    this.#waiters.wake(poke, now);
    await this.#worked();
    if (poke.atMs > now) return this.#dueAt(poke.atMs);
    this.#announced += poke.tasks;
    return this.#wakeNow();
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

  /** A due time came: every waiting pull claims again, and the shards wake. */
  async alarm(): Promise<void> {
    this.#waiters.wakeAll();
    await this.#wakeShards();
  }

  /**
   * One round of shard wakes for now, or, with one under way, one more after it: a burst of
   * pokes wakes the shards twice at most. A round that fails leaves the alarm set for now, which
   * the platform retries.
   */
  #wakeNow(): Promise<void> {
    if (this.#waking) {
      this.#wakeAgain = true;
      return this.#waking;
    }
    const round = this.#wakeShards()
      .catch(async (error: unknown) => {
        console.error('sluice: waking the pusher shards failed; the alarm tries again', error);
        await this.#dueAt(Date.now());
      })
      .finally(() => {
        this.#waking = null;
        if (this.#wakeAgain) {
          this.#wakeAgain = false;
          void this.#wakeNow();
        }
      });
    this.#waking = round;
    return round;
  }

  /**
   * Wakes shards 0…n-1, as many as the tasks announced since the last round need. Shards that
   * are busy already just claim again; shards that find more than they can push wake the next
   * ones themselves.
   */
  async #wakeShards(): Promise<void> {
    const config = loadConfig(this.env);
    const shards = shardsToWake(this.#announced, config.dispatchParallelism, config.dispatchShards);
    this.#announced = 0;
    await Promise.all(Array.from({ length: shards }, (_, i) => pusherOf(this.env, i).wake(i)));
  }
}
