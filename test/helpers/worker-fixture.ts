/**
 * The usual worker-tier setup: a fresh database, the local stand-in for Neon's proxy, a
 * recording endpoint, generated secrets, and the real Worker bundled once and run in workerd;
 * torn down after the file. More Workers on the same database come from `start`.
 */
import { afterAll, beforeAll, inject } from 'vitest';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { type RunningDelay, startTcpDelay } from '../../src/node/tcp-delay.ts';
import { bundleWorker, type RunningWorker, startWorker } from '../../src/node/worker-runtime.ts';
import { type RunningProxy, startWsProxy } from '../../src/node/ws-proxy.ts';
import { makeSecrets, type TestSecrets, testEnv } from './config.ts';
import { createTestDatabase, type TestDatabase } from './db.ts';
import { startEndpoint, type TestEndpoint } from './endpoint.ts';

export interface WorkerFixture {
  t: TestDatabase;
  proxy: RunningProxy;
  endpoint: TestEndpoint;
  secrets: TestSecrets;
  script: string;
  /** The file's Worker, started with the fixture's variables. */
  worker: RunningWorker;
  /** The Worker's variables: test secrets, this database, the proxy, plus `extra`. */
  vars(extra?: Record<string, string>): Record<string, string>;
  /** Another Worker on the same database (the caller closes it). */
  start(extra?: Record<string, string>): Promise<RunningWorker>;
}

/**
 * How the file's Workers reach Postgres: `SLUICE_TEST_DATABASE_PATH=hyperdrive` runs the worker
 * tier through a Hyperdrive binding (`npm run test:hyperdrive`); by default, Neon's driver
 * through the local stand-in.
 */
export const TEST_DATABASE_PATH = (() => {
  const path = process.env.SLUICE_TEST_DATABASE_PATH ?? 'neon';
  if (path !== 'neon' && path !== 'hyperdrive') throw new Error(`SLUICE_TEST_DATABASE_PATH must be neon or hyperdrive, not ${path}`);
  return path;
})();

/** `url` with its host and port those of `relay`. */
function relayed(url: string, relay: RunningDelay): string {
  const u = new URL(url);
  u.hostname = relay.host;
  u.port = String(relay.port);
  return u.href;
}

/** Registers the hooks; the returned object is filled in before the first test runs. */
export function useWorkerFixture(extra: (f: WorkerFixture) => Record<string, string> = () => ({})): WorkerFixture {
  const path: Record<string, string> = TEST_DATABASE_PATH === 'hyperdrive' ? { SLUICE_DATABASE_PATH: 'hyperdrive' } : {};
  /** On the Hyperdrive path: the binding's way to Postgres, which `proxy.cut()` cuts too. */
  let relay: RunningDelay | null = null;
  const f = {
    vars: (more: Record<string, string> = {}) => testEnv(f.secrets, f.t.url, { SLUICE_NEON_WS_PROXY: f.proxy.address, ...path, ...more }),
    start: (more: Record<string, string> = {}) =>
      startWorker({ script: f.script, vars: f.vars(more), ...(relay ? { hyperdrive: relayed(f.t.url, relay) } : {}) }),
  } as WorkerFixture;
  beforeAll(async () => {
    let proxy: RunningProxy;
    [f.t, proxy, f.endpoint, f.secrets, f.script, relay] = await Promise.all([
      createTestDatabase(),
      startWsProxy({ host: '127.0.0.1', port: inject('pgPort') }),
      startEndpoint(),
      makeSecrets(),
      bundleWorker(),
      TEST_DATABASE_PATH === 'hyperdrive' ? startTcpDelay({ host: '127.0.0.1', port: inject('pgPort') }, 0) : null,
    ]);
    const hd = relay;
    f.proxy = hd ? { ...proxy, cut: () => proxy.cut() + hd.cut(), suspend: (ms) => proxy.suspend(ms) + hd.suspend(ms) } : proxy;
    f.worker = await f.start(extra(f));
  });
  afterAll(async () => {
    await f.worker?.close();
    await Promise.all([f.endpoint?.close(), f.proxy?.close(), relay?.close()]);
    await f.t?.drop();
  });
  return f;
}

/**
 * A Node server beside the file's Worker, on a database of its own, with the fixture's secrets
 * (so that one test body runs on both paths); registered in the calling `describe`.
 */
export function useNodeBeside(
  f: WorkerFixture,
  extra: Record<string, string> | ((f: WorkerFixture) => Record<string, string>) = {},
): { node: NodeSluice; t: TestDatabase } {
  const side = {} as { node: NodeSluice; t: TestDatabase };
  beforeAll(async () => {
    side.t = await createTestDatabase();
    side.node = await startNodeSluice({ env: testEnv(f.secrets, side.t.url, typeof extra === 'function' ? extra(f) : extra) });
  });
  afterAll(async () => {
    await side.node?.close();
    await side.t?.drop();
  });
  return side;
}

/** One JSON call to Sluice's API with a bearer token (a key, a lease token): its status and answer. */
export async function apiCall(base: string, token: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}
