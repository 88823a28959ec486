/**
 * `npm start`: Sluice on this machine, nothing to install by hand. Starts an embedded
 * Postgres (data in `.sluice/pg`, so tasks survive a restart), migrates it, runs the real
 * Worker in workerd (Miniflare) with the Neon driver reaching Postgres through a local
 * WebSocket proxy, fires the cron every minute, and starts an echo endpoint to push to.
 * `SLUICE_DEV_DB_RTT_MS` puts the database that many milliseconds away (every round trip of
 * the Neon driver costs it), as Neon is from a Worker in production.
 */
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { devVars, loadDevSecrets } from './dev-secrets.ts';
import { startEchoEndpoint } from './echo-endpoint.ts';
import { migrateDatabase } from './migrations.ts';
import { startEmbeddedPostgres } from './postgres.ts';
import { parseRttMs } from './tcp-delay.ts';
import { startWorker } from './worker-runtime.ts';
import { startWsProxy } from './ws-proxy.ts';

const STATE_DIR = fileURLToPath(new URL('../../.sluice/', import.meta.url));
const PORT = Number(process.env.PORT ?? 8787);
const PG_PORT = Number(process.env.SLUICE_DEV_PG_PORT ?? 54329);
const ECHO_PORT = Number(process.env.SLUICE_DEV_ECHO_PORT ?? 8788);
const DB_RTT_MS = rttSetting();

const postgres = await startEmbeddedPostgres({ dir: `${STATE_DIR}pg`, port: PG_PORT });
await ensureDatabase(postgres.url('postgres'), 'sluice');
const databaseUrl = postgres.url('sluice');
const applied = await migrateDatabase(databaseUrl);
const proxy = await startWsProxy({ host: '127.0.0.1', port: postgres.port }, { rttMs: DB_RTT_MS });
const secrets = await loadDevSecrets(`${STATE_DIR}dev.json`);
const worker = await startWorker({ vars: devVars(secrets, databaseUrl, proxy.address), port: PORT });
const echo = await startEchoEndpoint({ jwksUrl: `${worker.url}/.well-known/jwks.json`, port: ECHO_PORT });

const cron = setInterval(() => worker.scheduled().catch((e) => console.error('cron run failed:', e)), 60_000);
await worker.scheduled();

// Stops are handled before readiness is announced (one sent at once must still stop everything).
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, async () => {
    if (stopping) return;
    stopping = true;
    clearInterval(cron);
    await Promise.allSettled([worker.close(), echo.close(), proxy.close()]);
    await postgres.stop();
    process.exit(0);
  });
}

console.log(`
Sluice is running (the real Worker, in workerd).

  API          ${worker.url}
  API key      ${secrets.apiKey}
  Postgres     ${databaseUrl}${applied.length ? `  (migrated: ${applied.join(', ')})` : ''}${DB_RTT_MS ? `\n               the Worker reaches it ${DB_RTT_MS} ms away (SLUICE_DEV_DB_RTT_MS)` : ''}
  Echo target  ${echo.url}/echo  (verifies every push's signature)
  Dashboard    ${worker.url}/dashboard  (sign in with the API key)

Enqueue a task:

  curl -s ${worker.url}/v1/tasks \\
    -H 'authorization: Bearer ${secrets.apiKey}' \\
    -H 'content-type: application/json' \\
    -d '{"url":"${echo.url}/echo","body":{"hello":"world"}}'

Then read it back with: curl -s ${worker.url}/v1/tasks/<id> -H 'authorization: Bearer ${secrets.apiKey}'
Ctrl-C stops everything.
`);

/** A bad value stops the start before anything runs, in one line naming the variable. */
function rttSetting(): number {
  try {
    return parseRttMs('SLUICE_DEV_DB_RTT_MS', process.env.SLUICE_DEV_DB_RTT_MS);
  } catch (error) {
    console.error(`sluice: ${(error as Error).message}`);
    process.exit(2);
  }
}

async function ensureDatabase(adminUrl: string, name: string): Promise<void> {
  const client = new pg.Client(adminUrl);
  await client.connect();
  try {
    const { rowCount } = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (!rowCount) await client.query(`create database ${name}`);
  } finally {
    await client.end();
  }
}
