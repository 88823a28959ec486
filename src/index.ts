/**
 * The Cloudflare Worker: the API (`fetch`) and the cron-triggered dispatcher (`scheduled`).
 * The database is reached with the Neon driver, one Pool per invocation.
 */
import { createApp } from './api/app.ts';
import type { ExecutionContextLike } from './api/context.ts';
import { type Env, loadConfig } from './config.ts';
import { openNeonDb } from './db/neon.ts';
import { runDispatcher } from './dispatcher/entry.ts';

const app = createApp({
  openDb: openNeonDb,
  kick(config, _env, ctx) {
    ctx.waitUntil(runDispatcher(config, openNeonDb, 'kick').catch((error) => console.error('sluice: kicked dispatcher run failed', error)));
  },
});

export default {
  fetch: app.fetch,
  async scheduled(_controller: { cron: string; scheduledTime: number }, env: Env, _ctx: ExecutionContextLike): Promise<void> {
    await runDispatcher(loadConfig(env), openNeonDb, 'cron');
  },
};
