/**
 * The Hono app: routes, the per-request context (config, database, poke) and the one error
 * mapping. Platform differences (Workers vs a long-lived server) come in through `Platform`.
 */
import { Hono } from 'hono';
import { loadConfig } from '../config.ts';
import { ConfigError, TooManyRequestsError, UnauthorizedError } from '../core/errors.ts';
import { pokeNow } from '../core/wake.ts';
import type { OpenDb } from '../db/db.ts';
import { MIGRATE_HINT } from '../db/migrate.ts';
import { loadKeyring } from '../security/keyring.ts';
import type { AppEnv, Platform } from './context.ts';
import { dashboard } from './dashboard/index.ts';
import { problemOf, problemResponse, UNAVAILABLE_RETRY_AFTER_S } from './problem.ts';
import { endpoints } from './routes/endpoints.ts';
import { groups } from './routes/groups.ts';
import { leases } from './routes/leases.ts';
import { meta } from './routes/meta.ts';
import { metrics } from './routes/metrics.ts';
import { queues } from './routes/queues.ts';
import { redrive } from './routes/redrive.ts';
import { schedules } from './routes/schedules.ts';
import { tasks } from './routes/tasks.ts';
import { webhooks } from './routes/webhooks.ts';

export function createApp(platform: Platform): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  app.use('*', async (c, next) => {
    const config = loadConfig(c.env);
    c.set('config', config);
    c.set('clientAddress', platform.clientAddress(c.req.raw));
    c.set('processStats', platform.processStats ?? null);
    c.set('keyring', () => loadKeyring(config.signingKeys));
    // Opened on first use: a health check of the JWKS never touches the database.
    let db: OpenDb | null = null;
    const open = (): OpenDb => {
      db ??= platform.openDb(config);
      return db;
    };
    c.set('db', {
      query: (text, params) => open().query(text, params),
      transaction: (fn) => open().transaction(fn),
    });
    c.set('poke', (poke = pokeNow(Date.now())) => platform.poke(poke, config, c.env, c.executionCtx));
    c.set('awaitWork', (queue, ms) => platform.awaitWork(queue, ms, c.env));
    try {
      await next();
    } finally {
      if (db) c.executionCtx.waitUntil((db as OpenDb).close());
    }
    c.header('x-content-type-options', 'nosniff');
  });

  // Enqueues and lease calls made in a trace are spans of it, where the platform exports spans.
  const spans = platform.spans;
  if (spans) {
    app.use('*', async (c, next) => {
      const traceparent = c.req.header('traceparent');
      const name = traceparent ? spanName(c.req.method, c.req.path) : null;
      if (!traceparent || name === null) return next();
      const startedAtMs = Date.now();
      await next();
      try {
        spans.request({
          name,
          traceparent,
          startedAtMs,
          endedAtMs: Date.now(),
          method: c.req.method,
          path: c.req.path,
          status: c.res.status,
        });
      } catch (error) {
        console.error('sluice: recording a request span failed', error);
      }
    });
  }

  app.route('/', meta);
  app.route('/metrics', metrics);
  app.route('/v1/tasks/redrive', redrive);
  app.route('/v1/tasks', tasks);
  app.route('/v1/queues', queues);
  app.route('/v1/leases', leases);
  app.route('/v1/schedules', schedules);
  app.route('/v1/webhooks', webhooks);
  app.route('/v1/endpoints', endpoints);
  app.route('/v1/groups', groups);
  app.route('/dashboard', dashboard);

  app.notFound((c) =>
    problemResponse(c, {
      type: 'about:blank',
      title: 'Not Found',
      status: 404,
      code: 'not_found',
      detail: `no route for ${c.req.method} ${new URL(c.req.url).pathname}`,
    }),
  );
  app.onError((error, c) => {
    const problem = problemOf(error);
    // One line, not a stack, for what the operator fixes outside the code.
    if (problem.code === 'schema_not_migrated') console.error(`sluice: ${(error as Error).message}; ${MIGRATE_HINT}`);
    // A passing fault (a cold or restarting database): the client was told when to come back.
    else if (problem.code === 'database_unavailable')
      console.warn(`sluice: the database does not answer (${(error as Error).message}); answered 503 with Retry-After`);
    else if (problem.status >= 500) console.error(error instanceof ConfigError ? error.message : error);
    // The operator reads the whole message in the log; a client learns only which variables.
    if (error instanceof ConfigError) {
      const names = [...new Set(error.issues.map((i) => i.path.split('.')[0]))].join(', ');
      return problemResponse(c, { ...problem, detail: `Sluice is misconfigured (${names}); the server log says how to fix it` });
    }
    if (error instanceof UnauthorizedError) c.header('www-authenticate', 'Bearer realm="sluice"');
    if (error instanceof TooManyRequestsError) c.header('retry-after', String(error.retryAfterS));
    if (problem.status === 503) c.header('retry-after', String(UNAVAILABLE_RETRY_AFTER_S));
    c.header('x-content-type-options', 'nosniff');
    return problemResponse(c, problem);
  });
  return app;
}

/** The span a traced request makes: an enqueue or a lease call; other requests make none. */
function spanName(method: string, path: string): string | null {
  if (method !== 'POST') return null;
  if (path === '/v1/tasks' || path === '/v1/tasks/batch') return 'sluice enqueue';
  const lease = /^\/v1\/leases\/[^/]+\/(heartbeat|complete|fail|release|wait)$/.exec(path);
  return lease ? `sluice lease ${lease[1]}` : null;
}
