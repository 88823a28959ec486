/**
 * Pull consumers (src/api/pull.ts), through the real Worker in workerd and the Node server: a
 * pull queue's tasks need no url and are leased by POST /v1/queues/:queue/lease, long-polled,
 * held as a pushed lease is (heartbeat, complete, expiry and redelivery), and under the one
 * cluster cap with the pushes of other queues.
 */
import { createLocalJWKSet, type JSONWebKeySet } from 'jose';
import { describe, expect, it } from 'vitest';
import { verifyPush } from '../../src/protocol/signature.ts';
import type { TestDatabase } from '../helpers/db.ts';
import { apiCall, useNodeBeside, useWorkerFixture } from '../helpers/worker-fixture.ts';

const CAP = 4;
/** A waiting pull claims again only when poked, or at a due time: never at the 1 s recheck. */
const RECHECK_MS = 60_000;
const VARS = {
  SLUICE_QUEUES: JSON.stringify({ inbox: { pull: true }, held: { pull: true }, race: { pull: true } }),
  SLUICE_CLUSTER_CAP: String(CAP),
  SLUICE_PULL_RECHECK_MS: String(RECHECK_MS),
};
const f = useWorkerFixture(() => VARS);

interface Pulled {
  id: string;
  attempt: number;
  body?: unknown;
  headers: Record<string, string>;
  lease: { id: string; token: string; expires_at: string };
  push?: { url: string; method: string; headers: Record<string, string>; body_text: string | null };
}

const call = (base: string, method: string, path: string, body?: unknown, token = f.secrets.apiKey) =>
  apiCall(base, token, method, path, body);

const pull = async (base: string, queue: string, request: Record<string, unknown> = {}) => {
  const answer = await call(base, 'POST', `/v1/queues/${queue}/lease`, request, f.secrets.pullKey);
  expect(answer.status).toBe(200);
  return answer.body.tasks as Pulled[];
};

const leaseCall = (base: string, task: Pulled, op: string, body: unknown = {}) =>
  call(base, 'POST', `/v1/leases/${task.lease.id}/${op}`, body, task.lease.token);

async function exercise(base: string, db: TestDatabase['db']) {
  // A task without a url is for a pull queue only; a pushed queue is not pulled.
  const refused = await call(base, 'POST', '/v1/tasks', { queue: 'pushed', body: { n: 0 } });
  expect(refused.status).toBe(400);
  expect(refused.body.issues).toEqual([{ path: 'url', message: expect.stringContaining('is not a pull queue') }]);
  const notPulled = await call(base, 'POST', '/v1/queues/pushed/lease', {}, f.secrets.pullKey);
  expect([notPulled.status, notPulled.body.code]).toEqual([409, 'not_pulled']);
  expect((await call(base, 'POST', '/v1/queues/inbox/lease', { max: 0 }, f.secrets.pullKey)).status).toBe(400);
  // Pulling takes the scope of its own: a key that may enqueue and read may not.
  expect((await call(base, 'POST', '/v1/queues/inbox/lease', {})).status).toBe(403);
  expect(await pull(base, 'inbox')).toEqual([]);

  // A pull waiting on an empty queue answers once a task is enqueued: the enqueue's poke wakes it.
  // Unwoken, it would claim again only at its recheck (a minute here) or at its wait's end (20 s):
  // the wait for its answer gives up long before either.
  const waiting = pull(base, 'inbox', { wait_ms: 20_000 });
  await new Promise((r) => setTimeout(r, 300));
  const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
  const enqueued = await call(base, 'POST', '/v1/tasks', { queue: 'inbox', body: { n: 1 }, traceparent });
  const enqueuedAt = performance.now();
  expect([enqueued.status, enqueued.body.url]).toEqual([201, null]);
  let unwoken: ReturnType<typeof setTimeout> | undefined;
  const [got] = await Promise.race([
    waiting,
    new Promise<never>((_, reject) => {
      unwoken = setTimeout(() => reject(new Error('the enqueue did not wake the waiting pull')), 10_000);
    }),
  ]).finally(() => clearTimeout(unwoken));
  console.info(`pull answered ${(performance.now() - enqueuedAt).toFixed(1)} ms after the enqueue's answer (${base})`);
  expect(got).toMatchObject({ id: enqueued.body.id, attempt: 1, body: { n: 1 } });
  // Its attempt is a span of the enqueuer's trace, as a push's would be.
  expect(got!.headers.traceparent).toMatch(/^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/);

  // The lease is held as after `Sluice-Ack: lease`: heartbeats extend it, complete ends it.
  const beat = await leaseCall(base, got!, 'heartbeat', { extend_ms: 90_000 });
  expect(beat.status).toBe(200);
  expect(Date.parse(String(beat.body.expires_at))).toBeGreaterThan(Date.parse(got!.lease.expires_at));
  expect((await leaseCall(base, got!, 'complete', { result: { ok: true } })).status).toBe(200);
  expect((await call(base, 'GET', `/v1/tasks/${got!.id}`)).body.status).toBe('succeeded');

  // An abandoned pulled lease expires, is reaped, and is delivered again as attempt 2; with
  // `push_to`, it comes as the push Sluice would send there, signed for that URL.
  const abandoned = await call(base, 'POST', '/v1/tasks', {
    queue: 'held',
    body: { n: 2 },
    lease_ms: 1_000,
    timeout_ms: 500,
    backoff: { initial_ms: 0, max_ms: 0 },
  });
  const [first] = await pull(base, 'held');
  expect(first).toMatchObject({ id: abandoned.body.id, attempt: 1 });
  const [again] = await pull(base, 'held', { wait_ms: 15_000, push_to: 'http://localhost:3000/handler' });
  expect(again).toMatchObject({ id: abandoned.body.id, attempt: 2 });
  const push = again!.push!;
  expect([push.url, push.method, push.body_text, push.headers['sluice-attempt']]).toEqual([
    'http://localhost:3000/handler',
    'POST',
    '{"n":2}',
    '2',
  ]);
  expect(push.headers['sluice-lease-id']).toBe(again!.lease.id);
  // Signed as a forwarded push (test/worker/forwarding.test.ts): with the forwarding keys.
  const keys = createLocalJWKSet((await (await fetch(`${base}/.well-known/forward-jwks.json`)).json()) as JSONWebKeySet);
  const claims = await verifyPush({
    token: push.headers['sluice-signature'],
    keys,
    url: push.url,
    body: new TextEncoder().encode(push.body_text!),
    nowMs: Date.now(),
    issuer: 'sluice-forward',
  });
  expect([claims.sub, claims.jti]).toEqual([abandoned.body.id, again!.lease.id]);
  expect((await leaseCall(base, again!, 'complete')).status).toBe(200);
  const attempts = await db.query<{ outcome: string; error: string | null }>(
    'select outcome, error from sluice.all_attempts where task_id = $1 order by attempt',
    [abandoned.body.id],
  );
  expect(attempts.map((a) => a.outcome)).toEqual(['retry', 'succeeded']);
  console.info(`the abandoned attempt ended: ${attempts[0]!.error}`);
}

/**
 * Pushes of one queue and pulls of another, at once under a cluster cap of CAP: the pushes the
 * endpoint holds and the leases the consumers hold never add up to more. A slot is counted from
 * when its holder has the task until it starts to give it back (an answer, a `complete`), so
 * the count can only be lower than the truth, never higher.
 */
async function race(base: string, db: TestDatabase['db'], name: string) {
  let held = 0;
  let most = 0;
  const take = () => {
    held++;
    most = Math.max(most, held);
  };
  f.endpoint.reply((p) => {
    if (!p.path.startsWith(`/${name}/`)) return { status: 200 };
    take();
    return new Promise((resolve) =>
      setTimeout(() => {
        held--;
        resolve({ status: 200 });
      }, 60),
    );
  });
  const n = 24;
  const tasks = (queue: string, url?: string) =>
    Array.from({ length: n }, (_, i) => ({ queue, body: { i }, ...(url ? { url: `${url}/${name}/${i}` } : {}) }));
  const [pushed, pulledQueued] = await Promise.all([
    call(base, 'POST', '/v1/tasks/batch', { tasks: tasks('pushes', f.endpoint.url) }),
    call(base, 'POST', '/v1/tasks/batch', { tasks: tasks('race') }),
  ]);
  expect([pushed.status, pulledQueued.status]).toEqual([201, 201]);
  let done = 0;
  const consumer = async () => {
    while (done < n) {
      const got = await pull(base, 'race', { max: 2, wait_ms: 2_000 });
      for (const _ of got) take();
      await new Promise((r) => setTimeout(r, 60));
      // Each slot is counted from the pull's answer until its complete is sent: both within the
      // lease's life, so what is counted here never exceeds what the database holds. (Counted
      // until the complete's answer, it could: another consumer's pull may be answered first.)
      held -= got.length;
      await Promise.all(got.map(async (t) => expect((await leaseCall(base, t, 'complete')).status).toBe(200)));
      done += got.length;
    }
  };
  // And what the database holds, read as a snapshot again and again while the race runs: each
  // reading is exact (every unexpired lease, pushed or pulled, at one instant).
  let racing = true;
  let mostInDb = 0;
  const watch = (async () => {
    while (racing) {
      const [row] = await db.query<{ n: number }>(
        `select count(*)::int as n from sluice.tasks where status = 'leased' and lease_expires_at > now()`,
      );
      mostInDb = Math.max(mostInDb, row!.n);
    }
  })();
  // Until the pushes are done too: they race for the same cap.
  try {
    await Promise.all([consumer(), consumer(), consumer()]);
    await expect
      .poll(async () => (await call(base, 'GET', '/v1/queues/pushes')).body.counts, { timeout: 30_000, interval: 100 })
      .toMatchObject({ pending: 0, leased: 0 });
  } finally {
    racing = false;
  }
  await watch;
  console.info(`race on ${base}: at most ${most} slots held at once (cap ${CAP}), at most ${mostInDb} leases in the database`);
  expect(most).toBeLessThanOrEqual(CAP);
  expect(mostInDb).toBeLessThanOrEqual(CAP);
  expect(mostInDb).toBeGreaterThan(1);
  expect(most).toBeGreaterThan(1);
}

describe('pull consumers', () => {
  it('on the Worker', async () => {
    await exercise(f.worker.url, f.t.db);
    await race(f.worker.url, f.t.db, 'worker');
  }, 90_000);

  describe('on the Node server', () => {
    const side = useNodeBeside(f, VARS);
    it('do the same', async () => {
      await exercise(side.node.url, side.t.db);
      await race(side.node.url, side.t.db, 'node');
    }, 90_000);
  });
});
