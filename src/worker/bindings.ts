/**
 * The Worker's Durable Objects as the rest of the Worker sees them (bindings declared in
 * wrangler.toml): one scheduler per deployment, and `SLUICE_DISPATCH_SHARDS` pushers.
 */
import type { Env } from '../config.ts';
import type { Poke } from '../core/wake.ts';

/** The scheduler's RPC surface (worker/scheduler.ts). */
export interface SchedulerRpc {
  poke(poke: Poke): Promise<void>;
  /** A shard's run ended: whether it did work, and the next due time it read (epoch ms, or null). */
  ran(worked: boolean, atMs: number | null): Promise<void>;
  /** The cron's minute: sets the alarm for now unless the deployment is at rest; says which. */
  tick(): Promise<{ resting: boolean }>;
  /** A waiting pull's wait (core/wake.ts `WorkWaiters`): resolves at a poke for `queue`, or after `ms`. */
  awaitWork(queue: string, ms: number): Promise<void>;
}

/** A pusher shard's RPC surface (worker/pusher.ts). */
export interface PusherRpc {
  wake(index: number): Promise<void>;
}

export const SCHEDULER_BINDING = 'SCHEDULER';
export const PUSHERS_BINDING = 'PUSHERS';

function namespace<T>(env: Env, binding: string): DurableObjectNamespace<T> {
  const ns = env[binding] as DurableObjectNamespace<T> | undefined;
  if (!ns)
    throw new Error(`the Durable Object binding ${binding} is missing: declare it in wrangler.toml (see docs/operations.md "Deploying")`);
  return ns;
}

/**
 * Where the objects are created: near the database (`SLUICE_DB_LOCATION_HINT`), since the
 * shards make nearly every database round trip; else near their first caller. A hint counts
 * only when an object is created: objects that exist stay where they are.
 */
function placement(env: Env): { locationHint?: DurableObjectLocationHint } {
  const hint = env.SLUICE_DB_LOCATION_HINT;
  return typeof hint === 'string' && hint !== '' ? { locationHint: hint as DurableObjectLocationHint } : {};
}

/** The deployment's one scheduler. */
export function schedulerOf(env: Env): SchedulerRpc {
  const ns = namespace<SchedulerRpc>(env, SCHEDULER_BINDING);
  return ns.get(ns.idFromName('scheduler'), placement(env));
}

/** Pusher shard `index` (0-based). */
export function pusherOf(env: Env, index: number): PusherRpc {
  const ns = namespace<PusherRpc>(env, PUSHERS_BINDING);
  return ns.get(ns.idFromName(`pusher-${index}`), placement(env));
}
