/**
 * Self-hosting on Node: the same app and dispatcher as the Worker, over node-postgres and any
 * `DATABASE_URL`, configured by the same environment variables. `npm run serve`.
 */
import { serve } from '@hono/node-server';
import { z } from 'zod';
import { createApp } from '../api/app.ts';
import { describeLimits, loadConfig } from '../config.ts';
import type { OpenDb } from '../db/db.ts';
import { DispatchLoop } from '../dispatcher/loop.ts';
import { dispatchRun } from '../dispatcher/run.ts';
import { loadKeyring } from '../security/keyring.ts';
import { openPgDb } from './pg-db.ts';

const env = process.env as Record<string, string>;
const config = loadConfig(env);
const serverEnv = z
  .object({
    PORT: z.coerce.number().int().min(0).max(65_535).default(8787),
    HOST: z.string().min(1).default('127.0.0.1'),
    SLUICE_POLL_INTERVAL_MS: z.coerce.number().int().min(100).max(3_600_000).default(5_000),
  })
  .safeParse(env);
if (!serverEnv.success) {
  console.error(`sluice: ${serverEnv.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  process.exit(2);
}
const { PORT: port, HOST: host, SLUICE_POLL_INTERVAL_MS: pollMs } = serverEnv.data;
const db = openPgDb(config.databaseUrl, 20);
const shared: OpenDb = { ...db, close: async () => {} };
const keyring = await loadKeyring(config.signingKeys);
const loop = new DispatchLoop(() => dispatchRun({ db, config, keyring }, { budgetMs: 30_000 }));
// A long-lived process has no invocation to extend: background work just runs.
const ctx = {
  waitUntil: (p: Promise<unknown>) => void p.catch((e) => console.error('sluice: background work failed', e)),
  passThroughOnException: () => {},
  props: {},
};
const app = createApp({ openDb: () => shared, kick: () => loop.wake() });

const server = serve({ fetch: (request) => app.fetch(request, env, ctx), port, hostname: host });
loop.start(pollMs);
console.log(`sluice: listening on http://${host}:${port}; dispatcher: ${describeLimits(config)}`);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, async () => {
    server.close();
    await loop.stop();
    await db.close();
    process.exit(0);
  });
}
