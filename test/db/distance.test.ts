/**
 * A database at a distance (src/node/tcp-delay.ts): the Neon stand-in's two transports and the
 * Node server's TCP relay each hold a round trip for the RTT they were given, and `npm start`
 * refuses an RTT it cannot use. Lower bounds only: a slow machine makes them surer, not flakier.
 */
import { spawnSync } from 'node:child_process';
import { neon, neonConfig, Pool } from '@neondatabase/serverless';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startTcpDelay } from '../../src/node/tcp-delay.ts';
import { type RunningProxy, startWsProxy } from '../../src/node/ws-proxy.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { BIN, ROOT } from '../helpers/process.ts';

const RTT = 40;
let t: TestDatabase;
let proxy: RunningProxy;

beforeAll(async () => {
  t = await createTestDatabase();
  const { hostname, port } = new URL(t.url);
  proxy = await startWsProxy({ host: hostname, port: Number(port) }, { rttMs: RTT });
  const host = proxy.address.slice(0, proxy.address.indexOf('/'));
  neonConfig.webSocketConstructor = WebSocket;
  neonConfig.wsProxy = (h, p) => `${proxy.address}?address=${h}:${p}`;
  neonConfig.useSecureWebSocket = false;
  neonConfig.pipelineTLS = false;
  neonConfig.pipelineConnect = false;
  neonConfig.fetchEndpoint = () => `http://${host}/sql`;
});
afterAll(async () => {
  await proxy?.close();
  await t?.drop();
});

/** How long `fn` took, in milliseconds. */
async function timed(fn: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await fn();
  return performance.now() - started;
}

describe('the Neon stand-in at a distance', () => {
  it('holds a WebSocket query for a round trip, and counts it', async () => {
    const pool = new Pool({ connectionString: t.url, max: 1 });
    try {
      const client = await pool.connect();
      const before = proxy.stats();
      expect(await timed(() => client.query('select 1'))).toBeGreaterThanOrEqual(RTT);
      const after = proxy.stats();
      expect(after.roundTrips - before.roundTrips).toBe(1);
      expect(after.messages.Q).toBe((before.messages.Q ?? 0) + 1);
      expect(after.messages.startup).toBeGreaterThanOrEqual(1);
      client.release();
    } finally {
      await pool.end();
    }
  });

  it('holds an HTTP query for a round trip', async () => {
    const sql = neon(t.url);
    await sql.query('select 1');
    const before = proxy.stats().sqlRequests;
    expect(await timed(() => sql.query('select 1'))).toBeGreaterThanOrEqual(RTT);
    expect(proxy.stats().sqlRequests).toBe(before + 1);
  });
});

describe("the Node server's relay to Postgres", () => {
  it('holds a query for a round trip', async () => {
    const { hostname, port } = new URL(t.url);
    const relay = await startTcpDelay({ host: hostname, port: Number(port) }, RTT);
    const url = new URL(t.url);
    url.host = `${relay.host}:${relay.port}`;
    const client = new pg.Client(url.toString());
    try {
      await client.connect();
      const before = relay.stats().roundTrips;
      expect(await timed(() => client.query('select 1'))).toBeGreaterThanOrEqual(RTT);
      expect(relay.stats().roundTrips).toBe(before + 1);
    } finally {
      await client.end();
      await relay.close();
    }
  });
});

describe('npm start', () => {
  it.each(['-1', 'far', '2.5'])('refuses SLUICE_DEV_DB_RTT_MS=%s in one line naming it', (value) => {
    const run = spawnSync(`${BIN}/node`, ['src/node/dev.ts'], {
      cwd: ROOT,
      env: { ...process.env, SLUICE_DEV_DB_RTT_MS: value },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(run.status).toBe(2);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^sluice: SLUICE_DEV_DB_RTT_MS must be/);
  });
});
