/**
 * The Worker as `bench:distance` runs it: src/index.ts unchanged, its Durable Objects wrapped to
 * count the requests each receives (RPC calls and alarm invocations, as Cloudflare bills them),
 * and `GET /__bench/do-requests?shards=N` to read and reset those counts. Bundled for workerd.
 */
import type { Env } from '../src/config.ts';
import type { Poke } from '../src/core/wake.ts';
import worker, { Pusher as SluicePusher, Scheduler as SluiceScheduler } from '../src/index.ts';

type Counts = Record<string, number>;

interface Counted {
  takeCounts(): Promise<Counts>;
}

function take(counts: Counts): Counts {
  const copy = { ...counts };
  for (const k of Object.keys(counts)) delete counts[k];
  return copy;
}

export class Scheduler extends SluiceScheduler implements Counted {
  #counts: Counts = {};
  override poke(poke: Poke): Promise<void> {
    this.#counts['scheduler.poke'] = (this.#counts['scheduler.poke'] ?? 0) + 1;
    return super.poke(poke);
  }
  override ran(worked: boolean, atMs: number | null): Promise<void> {
    this.#counts['scheduler.ran'] = (this.#counts['scheduler.ran'] ?? 0) + 1;
    return super.ran(worked, atMs);
  }
  override tick(): Promise<{ resting: boolean }> {
    this.#counts['scheduler.tick'] = (this.#counts['scheduler.tick'] ?? 0) + 1;
    return super.tick();
  }
  override awaitWork(queue: string, ms: number): Promise<void> {
    this.#counts['scheduler.awaitWork'] = (this.#counts['scheduler.awaitWork'] ?? 0) + 1;
    return super.awaitWork(queue, ms);
  }
  override alarm(): Promise<void> {
    this.#counts['scheduler.alarm'] = (this.#counts['scheduler.alarm'] ?? 0) + 1;
    return super.alarm();
  }
  async takeCounts(): Promise<Counts> {
    return take(this.#counts);
  }
}

export class Pusher extends SluicePusher implements Counted {
  #counts: Counts = {};
  override wake(index: number): Promise<void> {
    this.#counts['pusher.wake'] = (this.#counts['pusher.wake'] ?? 0) + 1;
    return super.wake(index);
  }
  override alarm(): Promise<void> {
    this.#counts['pusher.alarm'] = (this.#counts['pusher.alarm'] ?? 0) + 1;
    return super.alarm();
  }
  async takeCounts(): Promise<Counts> {
    return take(this.#counts);
  }
}

function stub(env: Env, binding: string, name: string): Counted {
  const ns = env[binding] as DurableObjectNamespace<Counted>;
  return ns.get(ns.idFromName(name));
}

export default {
  scheduled: worker.scheduled,
  async fetch(request: Request, env: Env, ctx: Parameters<typeof worker.fetch>[2]): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname !== '/__bench/do-requests') return worker.fetch(request, env, ctx);
    const shards = Number(url.searchParams.get('shards') ?? 4);
    const all = await Promise.all([
      stub(env, 'SCHEDULER', 'scheduler').takeCounts(),
      ...Array.from({ length: shards }, (_, i) => stub(env, 'PUSHERS', `pusher-${i}`).takeCounts()),
    ]);
    const sum: Counts = {};
    for (const counts of all) for (const [k, n] of Object.entries(counts)) sum[k] = (sum[k] ?? 0) + n;
    return Response.json(sum);
  },
};
