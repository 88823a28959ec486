/**
 * The Cloudflare Worker: the API (`fetch`), the cron safety net (`scheduled`), and the
 * dispatch Durable Objects (docs/DESIGN.md §6): the scheduler, which holds the one alarm set to the
 * next due time, and the pusher shards, which claim and push. The API reaches Postgres with
 * the Neon driver: one-shot HTTP queries, or a Pool per request (`SLUICE_API_DATABASE`).
 */
import { createApp } from './api/app.ts';
import type { ExecutionContextLike } from './api/context.ts';
import { type Env, loadConfig } from './config.ts';
import { pokeNow } from './core/wake.ts';
import { taskCountsRefresh } from './db/metrics.ts';
import { openNeonDb, openNeonHttpDb } from './db/neon.ts';
import { sweepFinished } from './dispatcher/retention.ts';
import { withDbRetry } from './dispatcher/retry-db.ts';
import { dispatchRun } from './dispatcher/run.ts';
import { loadKeyring } from './security/keyring.ts';
import { schedulerOf } from './worker/bindings.ts';

export { Pusher } from './worker/pusher.ts';
export { Scheduler } from './worker/scheduler.ts';

const app = createApp({
  // Set by Cloudflare's edge: the client's address, which a client cannot forge.
  clientAddress: (request) => request.headers.get('cf-connecting-ip'),
  openDb: (config) => (config.apiDatabase === 'http' ? openNeonHttpDb(config) : openNeonDb(config)),
  poke(poke, _config, env, ctx) {
    ctx.waitUntil(
      schedulerOf(env)
        .poke(poke)
        .catch((error) => console.error('sluice: poking the scheduler failed', error)),
    );
  },
  awaitWork: (queue, ms, env) => schedulerOf(env).awaitWork(queue, ms),
});

export default {
  fetch: app.fetch,
  /**
   * Every minute: repair a lost or late alarm (a poke for now), reap expired leases, delete
   * finished tasks past retention, count tasks for /metrics.
   */
  async scheduled(_controller: { cron: string; scheduledTime: number }, env: Env, _ctx: ExecutionContextLike): Promise<void> {
    const config = loadConfig(env);
    const db = openNeonDb(config);
    try {
      await Promise.all([
        schedulerOf(env).poke(pokeNow(Date.now(), 0)),
        dispatchRun({ db, config, keyring: await loadKeyring(config.signingKeys) }, { budgetMs: 0, reapOnly: true }),
        sweepFinished(db, config),
        withDbRetry(() => taskCountsRefresh(db)),
      ]);
    } finally {
      await db.close();
    }
  },
};
