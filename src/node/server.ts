/**
 * Sluice as one long-lived Node process: the app over node-postgres, served over HTTP, with a
 * dispatch loop that a kick wakes and a timer stands in for the cron. Used by `npm run serve`
 * and by tests that need the lease API reachable over real HTTP.
 */
import { serve } from '@hono/node-server';
import { createApp } from '../api/app.ts';
import { loadConfig } from '../config.ts';
import type { OpenDb } from '../db/db.ts';
import { DispatchLoop } from '../dispatcher/loop.ts';
import { dispatchRun } from '../dispatcher/run.ts';
import { loadKeyring } from '../security/keyring.ts';
import { openPgDb } from './pg-db.ts';

export interface NodeSluice {
  url: string;
  loop: DispatchLoop;
  close(): Promise<void>;
}

export async function startNodeSluice(options: {
  env: Record<string, string | undefined>;
  port?: number;
  host?: string;
  /** How often the loop runs without a kick. Default 5 s. */
  pollMs?: number;
  /** Connections to Postgres. Default 20. */
  poolSize?: number;
}): Promise<NodeSluice> {
  const config = loadConfig(options.env);
  const db = openPgDb(config.databaseUrl, options.poolSize ?? 20);
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
  const host = options.host ?? '127.0.0.1';
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: (request) => app.fetch(request, options.env, ctx), port: options.port ?? 0, hostname: host }, () =>
      resolve(s),
    );
  });
  const address = server.address() as { port: number };
  loop.start(options.pollMs ?? 5_000);
  return {
    url: `http://${host}:${address.port}`,
    loop,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await loop.stop();
      await db.close();
    },
  };
}
