/**
 * A short slice of the fault matrix (the reliability issue): real Sluice processes
 * (`node src/node/serve.ts`) on a real Postgres, pushing over real HTTP to an endpoint that
 * records every push, under a cluster cap, a queue limit and key limits. One fault at a time,
 * then the total-queue check: nothing lost, every duplicate explained by the fault, the
 * endpoint never above a limit, no lease left at rest.
 */
import type { ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { freePort } from '../../src/node/postgres.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { BIN, spawnReady } from '../helpers/process.ts';

const LIMITS = { cluster: 6, queue: 4, key: 1 };
const TASKS = 240;

let t: TestDatabase;
let secrets: TestSecrets;
let endpoint: Server;
let endpointUrl: string;
const servers: ChildProcess[] = [];

/** What the endpoint saw: pushes per task, and the most in flight at each level. */
const seen = {
  pushes: new Map<string, number>(),
  open: { cluster: 0, queue: 0, keys: new Map<string, number>() },
  peak: { cluster: 0, queue: 0, key: 0 },
};

beforeAll(async () => {
  [t, secrets] = await Promise.all([createTestDatabase(), makeSecrets()]);
  endpoint = createServer((req, res) => {
    const id = String(req.headers['sluice-task-id']);
    const queue = String(req.headers['sluice-queue']);
    const key = String(req.headers['sluice-concurrency-key'] ?? '');
    seen.pushes.set(id, (seen.pushes.get(id) ?? 0) + 1);
    const o = seen.open;
    o.cluster++;
    seen.peak.cluster = Math.max(seen.peak.cluster, o.cluster);
    if (queue === 'limited') {
      o.queue++;
      o.keys.set(key, (o.keys.get(key) ?? 0) + 1);
      seen.peak.queue = Math.max(seen.peak.queue, o.queue);
      seen.peak.key = Math.max(seen.peak.key, o.keys.get(key) ?? 0);
    }
    req.resume();
    // The handler runs its course whatever happens to the connection (as a real one would).
    setTimeout(() => {
      o.cluster--;
      if (queue === 'limited') {
        o.queue--;
        o.keys.set(key, (o.keys.get(key) ?? 0) - 1);
      }
      if (!res.destroyed) res.writeHead(200).end('ok');
    }, 40);
  });
  endpoint.keepAliveTimeout = 1;
  await new Promise<void>((r) => endpoint.listen(0, '127.0.0.1', r));
  endpointUrl = `http://127.0.0.1:${(endpoint.address() as { port: number }).port}`;
});
afterAll(async () => {
  for (const s of servers) s.kill('SIGKILL');
  endpoint?.closeAllConnections();
  endpoint?.close();
  await t?.drop();
});
beforeEach(async () => {
  await t.db.query('truncate sluice.tasks, sluice.keys cascade');
  seen.pushes.clear();
  Object.assign(seen.peak, { cluster: 0, queue: 0, key: 0 });
});

async function startServer(): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const env = testEnv(secrets, t.url, {
    PORT: String(port),
    SLUICE_LEASE_MS: '2000',
    SLUICE_PUSH_TIMEOUT_MS: '1000',
    SLUICE_CLUSTER_CAP: String(LIMITS.cluster),
    SLUICE_QUEUES: JSON.stringify({ limited: { concurrency: LIMITS.queue, key_concurrency: LIMITS.key } }),
  });
  const child = await spawnReady(`${BIN}/node`, ['src/node/serve.ts'], env, 'sluice: listening on');
  servers.push(child);
  return { url: `http://127.0.0.1:${port}`, child };
}

async function enqueueAll(base: string): Promise<void> {
  const tasks = Array.from({ length: TASKS }, (_, i) =>
    i % 2 === 0
      ? { url: `${endpointUrl}/work`, queue: 'limited', concurrency_key: `k${i % 6}` }
      : { url: `${endpointUrl}/work`, queue: 'open' },
  );
  const res = await fetch(`${base}/v1/tasks/batch`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ tasks }),
  });
  expect(res.status).toBe(201);
}

async function waitUntil(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The total-queue check, from the endpoint's record and the database. */
async function check(maxDuplicates: number): Promise<void> {
  const rows = await t.db.query<{ status: string; n: number }>('select status, count(*)::int as n from sluice.tasks group by status');
  expect(rows).toEqual([{ status: 'succeeded', n: TASKS }]);
  expect(seen.pushes.size).toBe(TASKS);
  const duplicated = [...seen.pushes.values()].filter((n) => n > 1).length;
  console.info(
    `faults: ${duplicated} tasks pushed twice; endpoint peaks cluster ${seen.peak.cluster}/${LIMITS.cluster}, queue ${seen.peak.queue}/${LIMITS.queue}, key ${seen.peak.key}/${LIMITS.key}`,
  );
  expect(duplicated).toBeLessThanOrEqual(maxDuplicates);
  expect(seen.peak.cluster).toBeLessThanOrEqual(LIMITS.cluster);
  expect(seen.peak.queue).toBeLessThanOrEqual(LIMITS.queue);
  expect(seen.peak.key).toBeLessThanOrEqual(LIMITS.key);
}

describe('faults', () => {
  it('a dispatcher killed (SIGKILL) mid-drain: another finishes, nothing lost, duplicates only what was in flight', async () => {
    const a = await startServer();
    await enqueueAll(a.url);
    await waitUntil('a third of the pushes', () => seen.pushes.size >= TASKS / 3);
    a.child.kill('SIGKILL');
    const killedAt = Date.now();
    const b = await startServer();
    await waitUntil('every task to succeed', async () => {
      const [row] = await t.db.query<{ n: number }>(`select count(*)::int as n from sluice.tasks where status = 'succeeded'`);
      return row!.n === TASKS;
    });
    console.info(`faults: kill -9 mid-drain: all ${TASKS} succeeded ${Date.now() - killedAt} ms after the kill`);
    // At most the pushes the killed process had in flight (its leases) are pushed twice.
    await check(LIMITS.cluster);
    b.child.kill('SIGTERM');
  });

  it('the database drops every Sluice connection mid-drain: the dispatcher reconnects and finishes', async () => {
    const a = await startServer();
    await enqueueAll(a.url);
    await waitUntil('a third of the pushes', () => seen.pushes.size >= TASKS / 3);
    await t.db.query(
      `select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`,
    );
    const cutAt = Date.now();
    await waitUntil('every task to succeed', async () => {
      const [row] = await t.db.query<{ n: number }>(`select count(*)::int as n from sluice.tasks where status = 'succeeded'`);
      return row!.n === TASKS;
    });
    console.info(`faults: connections terminated mid-drain: all ${TASKS} succeeded ${Date.now() - cutAt} ms after`);
    // A settle lost with its connection leaves a lease that expires: that task is pushed again.
    await check(LIMITS.cluster);
    a.child.kill('SIGTERM');
  });
});
