/**
 * The scheduler: one Durable Object per deployment holding the deployment's one alarm, set to
 * the next due time (docs/DESIGN.md §6). It never ticks and never touches Postgres: pokes move the
 * alarm earlier (the API's, for work due now or at an enqueued task's `run_at`; each idle
 * shard's, for the next due time it read), and when the alarm fires it wakes as many pusher
 * shards as the announced work needs. The cron pokes it every minute, so a lost alarm costs at
 * most a minute. Since every poke reaches it, it also holds the pulls waiting for work
 * (api/pull.ts): a poke for now wakes those of its queues, the alarm all of them.
 */
import { DurableObject } from 'cloudflare:workers';
import { type Env, loadConfig } from '../config.ts';
import { type Poke, shardsToWake, WorkWaiters } from '../core/wake.ts';
import { pusherOf, type SchedulerRpc } from './bindings.ts';

export class Scheduler extends DurableObject<Env> implements SchedulerRpc {
  /** Tasks announced as due now since the alarm last fired (kept in memory: a hint only). */
  #announced = 0;
  #waiters = new WorkWaiters();

  /** Work comes due at `poke.atMs`: the alarm moves there if that is earlier; never later. */
  async poke(poke: Poke): Promise<void> {
    if (poke.atMs <= Date.now()) this.#announced += poke.tasks;
    this.#waiters.wake(poke, Date.now());
    // Storage calls keep the input gate shut: no other poke interleaves between get and set.
    const current = await this.ctx.storage.getAlarm();
    if (current === null || poke.atMs < current) await this.ctx.storage.setAlarm(poke.atMs);
  }

  awaitWork(queue: string, ms: number): Promise<void> {
    return this.#waiters.wait(queue, ms);
  }

  /**
   * Wakes shards 0…n-1 (a poke arriving meanwhile sets a new alarm, which runs after this one).
   * Shards that are busy already just run once more; shards that find more than they can push
   * wake the next ones themselves.
   */
  async alarm(): Promise<void> {
    const config = loadConfig(this.env);
    const shards = shardsToWake(this.#announced, config.dispatchParallelism, config.dispatchShards);
    this.#announced = 0;
    this.#waiters.wakeAll();
    await Promise.all(Array.from({ length: shards }, (_, i) => pusherOf(this.env, i).wake(i)));
  }
}
