/**
 * The Cloudflare Worker: the API (`fetch`), the cron safety net (`scheduled`), and the
 * dispatch Durable Objects (docs/DESIGN.md §6): the scheduler, which holds the one alarm set to the
 * next due time, and the pusher shards, which claim and push. Postgres is reached with the Neon
 * driver or through Hyperdrive (db/workers.ts).
 */
import { createApp } from './api/app.ts';
import type { ExecutionContextLike } from './api/context.ts';
import { type Env, loadConfig } from './config.ts';
import { openApiDb, openDispatchDb } from './db/workers.ts';
import { Chores } from './dispatcher/chores.ts';
import { reapExpired } from './dispatcher/run.ts';
import { loadKeyring } from './security/keyring.ts';
import { schedulerOf } from './worker/bindings.ts';

export { Pusher } from './worker/pusher.ts';
export { Scheduler } from './worker/scheduler.ts';

const app = createApp({
  // Set by Cloudflare's edge: the client's address, which a client cannot forge.
  clientAddress: (request) => request.headers.get('cf-connecting-ip'),
  openDb: openApiDb,
  poke(poke, _config, env, ctx) {
    // Tried twice: at rest, no cron minute repairs a lost poke (core/rest.ts).
    const send = () => schedulerOf(env).poke(poke);
    ctx.waitUntil(
      send()
        .catch(send)
        .catch((error) => console.error('sluice: poking the scheduler failed', error)),
    );
  },
  awaitWork: (queue, ms, env) => schedulerOf(env).awaitWork(queue, ms),
});

export default {
  fetch: app.fetch,
  /**
   * Every minute, unless the deployment is at rest (core/rest.ts: then Postgres hears nothing):
   * repair a lost or late alarm (the scheduler's `tick` sets it for now), reap expired leases,
   * and do the chores (dispatcher/chores.ts).
   */
  async scheduled(_controller: { cron: string; scheduledTime: number }, env: Env, _ctx: ExecutionContextLike): Promise<void> {
    const config = loadConfig(env);
    if ((await schedulerOf(env).tick()).resting) return;
    const db = openDispatchDb(config);
    try {
      await Promise.all([
        reapExpired({ db, config, keyring: await loadKeyring(config.signingKeys) }),
        new Chores(config).runDue(db, Date.now()),
      ]);
    } finally {
      await db.close();
    }
  },
};
