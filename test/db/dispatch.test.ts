/** The dispatcher against a real Postgres, pushing over real HTTP to a local endpoint. */
import { createLocalJWKSet } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.ts';
import { taskClaimBatch } from '../../src/db/claim.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { leaseHeartbeat } from '../../src/db/leases.ts';
import { leaseSettleMany } from '../../src/db/settle.ts';
import { taskCancel, taskGet } from '../../src/db/tasks.ts';
import { dispatchRun } from '../../src/dispatcher/run.ts';
import { freePort } from '../../src/node/postgres.ts';
import { HEADERS } from '../../src/protocol/headers.ts';
import { verifyPush } from '../../src/protocol/signature.ts';
import { verifyWebhook, webhookSecretBytes } from '../../src/protocol/webhook.ts';
import type { Keyring } from '../../src/security/keyring.ts';
import { verifyLeaseToken } from '../../src/security/lease-token.ts';
import { endpointWebhookSecret } from '../../src/security/webhook-secrets.ts';
import type { TestDatabase } from '../helpers/db.ts';
import type { TestEndpoint } from '../helpers/endpoint.ts';
import { useDispatchFixture } from '../helpers/fixture.ts';
import { newTask } from '../helpers/tasks.ts';

const f = useDispatchFixture({ SLUICE_WEBHOOK_SECRET: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', SLUICE_DISPATCH_PARALLELISM: '4' });
let t: TestDatabase;
let endpoint: TestEndpoint;
let config: Config;
let keyring: Keyring;
beforeAll(() => {
  ({ t, endpoint, config, keyring } = f);
});

const run = (overrides: Partial<Config> = {}) =>
  dispatchRun({ db: t.db, config: { ...config, ...overrides }, keyring }, { budgetMs: 5_000 });
const enqueue = async (overrides: Parameters<typeof newTask>[0] = {}) =>
  (await taskInsertMany(t.db, [newTask({ url: `${endpoint.url}/hook`, ...overrides })]))[0]!.task;
const get = async (id: string) => (await taskGet(t.db, id))!;
/** Makes a task waiting for its retry due now. */
const dueNow = (id: string) => t.db.query('update sluice.tasks set run_at = now() where id = $1', [id]);

describe('a push', () => {
  it('carries the protocol headers and a signature that verifies against the JWKS', async () => {
    const task = await enqueue({ body: '{"hello":"world"}', concurrencyKey: 'tenant-7', headers: { 'x-trace': 'abc', 'X-Case': 'A' } });
    const report = await run();
    expect(report).toMatchObject({ claimed: 1, succeeded: 1 });
    const [push] = endpoint.received;
    const h = push!.headers;
    expect(push!.method).toBe('POST');
    expect(push!.text).toBe('{"hello":"world"}');
    expect(h['content-type']).toBe('application/json');
    expect([h['x-trace'], h['x-case']]).toEqual(['abc', 'A']);
    expect(h['sluice-task-id']).toBe(task.id);
    expect(h['sluice-queue']).toBe('default');
    expect(h['sluice-concurrency-key']).toBe('tenant-7');
    expect(h['sluice-attempt']).toBe('1');
    expect(h['sluice-max-attempts']).toBe('5');
    const claims = await verifyPush({
      token: h['sluice-signature'] as string,
      keys: createLocalJWKSet(keyring.jwks),
      url: push!.url,
      body: push!.body,
      nowMs: Date.now(),
      issuer: 'sluice',
    });
    expect(claims).toMatchObject({ sub: task.id, jti: h['sluice-lease-id'] });
    const lease = await verifyLeaseToken(keyring, h['sluice-lease-token'] as string, 'sluice', Date.now());
    expect(lease).toEqual({ taskId: task.id, leaseId: h['sluice-lease-id'] });
    expect(Date.parse(h['sluice-lease-expires-at'] as string)).toBeGreaterThan(Date.now());
  });

  it("also carries Standard Webhooks headers, signed with the endpoint's own secret", async () => {
    const task = await enqueue({ url: `${endpoint.url}/hook?order=7` });
    await run();
    const push = endpoint.received[0]!;
    const h = push.headers;
    expect(h[HEADERS.webhookId]).toBe(task.id);
    const master = webhookSecretBytes('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
    const verify = (secret: string) =>
      verifyWebhook(
        webhookSecretBytes(secret),
        {
          id: h[HEADERS.webhookId] as string,
          timestamp: h[HEADERS.webhookTimestamp] as string,
          signature: h[HEADERS.webhookSignature] as string,
        },
        push.text,
        Date.now(),
      );
    // The secret this endpoint was given (the query is not part of the endpoint) verifies…
    expect(await verify(await endpointWebhookSecret(master, `${endpoint.url}/hook`))).toBe(true);
    // …and neither the master nor another endpoint's secret does: no receiver can forge for another.
    expect(await verify('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')).toBe(false);
    expect(await verify(await endpointWebhookSecret(master, `${endpoint.url}/other`))).toBe(false);
  });

  it('while the webhook master rotates, signs under both: a receiver with either secret verifies', async () => {
    const next = webhookSecretBytes('whsec_YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo=');
    await enqueue({ url: `${endpoint.url}/rotating` });
    await run({ webhookSecretNext: next });
    const push = endpoint.received[0]!;
    const h = push.headers;
    const verify = async (master: Uint8Array<ArrayBuffer>) =>
      verifyWebhook(
        webhookSecretBytes(await endpointWebhookSecret(master, `${endpoint.url}/rotating`)),
        {
          id: h[HEADERS.webhookId] as string,
          timestamp: h[HEADERS.webhookTimestamp] as string,
          signature: h[HEADERS.webhookSignature] as string,
        },
        push.text,
        Date.now(),
      );
    expect((h[HEADERS.webhookSignature] as string).split(' ')).toHaveLength(2);
    expect(await verify(webhookSecretBytes('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'))).toBe(true);
    expect(await verify(next)).toBe(true);
  });

  it('sends no body for a GET, and the given method otherwise', async () => {
    await enqueue({ method: 'GET', body: null });
    await enqueue({ method: 'PUT', body: 'plain', contentType: 'text/plain' });
    await run({ dispatchParallelism: 1 });
    expect(endpoint.received.map((p) => [p.method, p.text, p.headers['content-type']])).toEqual([
      ['GET', '', undefined],
      ['PUT', 'plain', 'text/plain'],
    ]);
  });
});

describe('outcomes', () => {
  it('2xx: succeeded, the response body kept as the result, the lease gone', async () => {
    endpoint.reply(() => ({ status: 201, body: '{"done":true}' }));
    const task = await enqueue();
    await run();
    expect(await get(task.id)).toMatchObject({ status: 'succeeded', result: '{"done":true}', lastStatus: 201, attempts: 1, lease: null });
  });

  it('one task, one claim pass: none in vain after its push or its settle', async () => {
    await enqueue();
    // The first pass leases the task (it asked for 4). Its push's end frees no slot, and its
    // settle says no work waits: no pass follows either. There were three passes a task, the
    // last two always in vain.
    expect(await run()).toMatchObject({ claimed: 1, succeeded: 1, claimPasses: 1 });
  });

  it("a task held back by its key's limit is claimed once the first one's settle commits", async () => {
    await enqueue({ concurrencyKey: 'one-at-a-time', concurrencyLimit: 1 });
    await enqueue({ concurrencyKey: 'one-at-a-time', concurrencyLimit: 1 });
    // The first pass leases one; the settle says work waits (the key's lane has a task due),
    // so the second pass follows it and leases the other; the second settle says none waits.
    expect(await run()).toMatchObject({ claimed: 2, succeeded: 2, claimPasses: 2 });
    expect(endpoint.received).toHaveLength(2);
  });

  it('5xx: retried after the backoff, then succeeds on the next attempt', async () => {
    let calls = 0;
    endpoint.reply(() => (++calls === 1 ? { status: 500, body: 'down' } : { status: 200 }));
    const task = await enqueue({ backoff: { initialMs: 10_000, maxMs: 60_000, factor: 2, jitter: 0 } });
    const before = Date.now();
    expect(await run()).toMatchObject({ retried: 1 });
    const waiting = await get(task.id);
    expect(waiting).toMatchObject({ status: 'pending', attempts: 1, lastError: 'HTTP 500: down', lastStatus: 500, lease: null });
    expect(waiting.runAt.getTime() - before).toBeGreaterThanOrEqual(9_000);
    expect(await run()).toMatchObject({ claimed: 0 });
    await dueNow(task.id);
    await run();
    expect(await get(task.id)).toMatchObject({ status: 'succeeded', attempts: 2 });
    expect(endpoint.received.map((p) => p.headers['sluice-attempt'])).toEqual(['1', '2']);
  });

  it('dies after max_attempts failures', async () => {
    endpoint.reply(() => ({ status: 502 }));
    const task = await enqueue({ maxAttempts: 2 });
    await run();
    await dueNow(task.id);
    expect(await run()).toMatchObject({ dead: 1 });
    expect(await get(task.id)).toMatchObject({ status: 'dead', attempts: 2, lastError: 'HTTP 502 (attempt 2 of 2)' });
  });

  it('dies at once when the endpoint says Sluice-Retry: false', async () => {
    endpoint.reply(() => ({ status: 400, headers: { 'Sluice-Retry': 'false' }, body: 'bad payload' }));
    const task = await enqueue();
    await run();
    expect(await get(task.id)).toMatchObject({ status: 'dead', attempts: 1, lastError: 'HTTP 400: bad payload' });
  });

  it('429 with Retry-After: deferred, and no attempt consumed', async () => {
    endpoint.reply(() => ({ status: 429, headers: { 'Retry-After': '30' } }));
    const task = await enqueue();
    const before = Date.now();
    expect(await run()).toMatchObject({ deferred: 1 });
    const deferred = await get(task.id);
    expect(deferred).toMatchObject({ status: 'pending', attempts: 0, deferrals: 1, lastStatus: 429 });
    expect(deferred.runAt.getTime() - before).toBeGreaterThanOrEqual(29_000);
  });

  it('a redirect is a failure and is not followed', async () => {
    endpoint.reply((push) =>
      push.path === '/hook' ? { status: 302, headers: { location: `${endpoint.url}/elsewhere` } } : { status: 200 },
    );
    const task = await enqueue();
    await run();
    expect(endpoint.received.map((p) => p.path)).toEqual(['/hook']);
    expect(await get(task.id)).toMatchObject({ status: 'pending', attempts: 1, lastStatus: 302 });
  });

  it('a push that outlives its timeout keeps its slot until the lease expires, then counts as a failed attempt', async () => {
    // Queue "one" takes one task at a time. The first push hangs past its timeout: its handler
    // is still running (until the test lets it go), so the second task waits for the lease.
    await t.db.query(`insert into sluice.queues (name, options) values ('one', '{"concurrency": 1}')`);
    let open = 0;
    let peak = 0;
    let letGo: () => void = () => {};
    const hanging = new Promise<void>((r) => {
      letGo = r;
    });
    endpoint.reply(async (push) => {
      open++;
      peak = Math.max(peak, open);
      if (push.path === '/hangs') await hanging;
      open--;
      return { status: 200 };
    });
    const hung = await enqueue({ queue: 'one', url: `${endpoint.url}/hangs`, timeoutMs: 200, leaseMs: 2_000, maxAttempts: 1 });
    const next = await enqueue({ queue: 'one', url: `${endpoint.url}/next` });
    const first = await run();
    expect(first).toMatchObject({ claimed: 1, unanswered: 1 });
    expect(await get(hung.id)).toMatchObject({
      status: 'leased',
      lastError: expect.stringMatching(/^attempt 1: push timed out after \d+ ms; its slot is held until the lease expires$/),
    });
    expect(await get(next.id)).toMatchObject({ status: 'pending' });
    // The handler finishes while its lease is still live; nobody else was pushed meanwhile.
    letGo();
    await expect.poll(() => open).toBe(0);
    const expiresAt = Date.parse(endpoint.received[0]!.headers['sluice-lease-expires-at'] as string);
    await new Promise((r) => setTimeout(r, Math.max(0, expiresAt - Date.now()) + 50));
    const second = await run();
    expect(second).toMatchObject({ reaped: 1, dead: 1, claimed: 1, succeeded: 1 });
    expect(await get(hung.id)).toMatchObject({
      status: 'dead',
      lastError: expect.stringMatching(/^push timed out after \d+ ms, then lease expired at /),
    });
    const [push] = endpoint.received.filter((p) => p.path === '/next');
    expect(push!.receivedAt).toBeGreaterThanOrEqual(expiresAt);
    expect(peak).toBe(1);
  });

  it('a push whose connection was refused (surely never sent) fails at once and retries', async () => {
    // Nothing listens there: the connection is refused, so nothing reached anyone.
    const task = await enqueue({ url: `http://127.0.0.1:${await freePort()}/closed` });
    await run();
    expect(await get(task.id)).toMatchObject({ status: 'pending', attempts: 1, lastError: expect.stringMatching(/network error/) });
  });

  it('a refused target fails for good without a request', async () => {
    const task = await enqueue({ url: 'http://127.0.0.1:9/never' });
    await run({ allowPrivateTargets: false });
    expect(endpoint.received).toHaveLength(0);
    expect(await get(task.id)).toMatchObject({ status: 'dead', lastError: expect.stringMatching(/push refused: url must be https/) });
  });

  it('a leased task whose cancellation was requested ends cancelled instead of retrying', async () => {
    endpoint.reply(async (push) => {
      // Cancelled while its push is open: the failure that follows must not retry it.
      const during = await taskCancel(t.db, push.headers['sluice-task-id'] as string);
      expect(during).toMatchObject({ status: 'leased', cancelRequestedAt: expect.any(Date) });
      return { status: 500 };
    });
    const task = await enqueue();
    await run();
    expect(await get(task.id)).toMatchObject({ status: 'cancelled', attempts: 1, lease: null, finishedAt: expect.any(Date) });
  });
});

describe('the reap step', () => {
  it('settles an expired lease as a timed-out attempt, and the task is pushed again', async () => {
    const task = await enqueue({ leaseMs: 1_000, timeoutMs: 500, backoff: { initialMs: 0, maxMs: 0, factor: 2, jitter: 0 } });
    // A dispatcher that claims and dies before pushing:
    await taskClaimBatch(t.db, { max: 10, clusterCap: null, queuesJson: '{}' });
    await new Promise((r) => setTimeout(r, 1_100));
    const report = await run();
    expect(report).toMatchObject({ reaped: 1, claimed: 1, succeeded: 1 });
    expect(await get(task.id)).toMatchObject({ status: 'succeeded', attempts: 2 });
    expect(endpoint.received).toHaveLength(1);
  });

  it('expires a pending task whose deadline passed, without pushing it', async () => {
    const task = await enqueue({ ttlMs: 50, delayMs: 100 });
    await new Promise((r) => setTimeout(r, 150));
    await run();
    expect(await get(task.id)).toMatchObject({ status: 'expired', attempts: 0 });
    expect(endpoint.received).toHaveLength(0);
  });
});

describe('fencing', () => {
  it('a settlement naming a lease that is no longer held changes nothing', async () => {
    const task = await enqueue();
    const [leased] = await taskClaimBatch(t.db, { max: 1, clusterCap: null, queuesJson: '{}' });
    const stale = {
      taskId: task.id,
      leaseId: crypto.randomUUID(),
      leasedAt: new Date(),
      attempt: 1,
      durationMs: 5,
      settlement: { status: 'succeeded', result: 'stale', httpStatus: 200 },
    } as const;
    expect(await leaseSettleMany(t.db, [stale])).toEqual(new Map());
    const after = await get(task.id);
    expect(after).toMatchObject({ status: 'leased', result: null, lease: { id: leased!.lease.id } });
    // The holder's own settlement still lands; a second one with the same lease does not.
    const own = { ...stale, leaseId: leased!.lease.id };
    expect(await leaseSettleMany(t.db, [own])).toEqual(new Map([[task.id, 'succeeded']]));
    expect(await leaseSettleMany(t.db, [{ ...own, settlement: { status: 'dead', error: 'late', httpStatus: null } }])).toEqual(new Map());
    expect(await get(task.id)).toMatchObject({ status: 'succeeded', result: 'stale' });
  });
});

describe('expiry', () => {
  it('a lease past its expiry, not yet reaped, can be neither extended nor ended by its holder; only the reaper ends it', async () => {
    const task = await enqueue({ leaseMs: 1_000, timeoutMs: 500 });
    const [leased] = await taskClaimBatch(t.db, { max: 1, clusterCap: null, queuesJson: '{}' });
    const item = (require?: 'unexpired' | 'expired') => ({
      taskId: task.id,
      leaseId: leased!.lease.id,
      leasedAt: leased!.lease.leasedAt,
      attempt: 1,
      durationMs: null,
      settlement: { status: 'succeeded', result: 'late', httpStatus: 200 } as const,
      ...(require ? { require } : {}),
    });
    // While it is alive the reaper may not touch it (a heartbeat that just landed wins).
    expect(await leaseSettleMany(t.db, [item('expired')])).toEqual(new Map());
    await new Promise((r) => setTimeout(r, 1_100));
    expect(await leaseHeartbeat(t.db, leased!.id, leased!.lease.id, 60_000, 3_600_000)).toEqual({ ok: false });
    expect(await leaseSettleMany(t.db, [item('unexpired')])).toEqual(new Map());
    expect(await get(task.id)).toMatchObject({ status: 'leased', result: null });
    expect([...(await leaseSettleMany(t.db, [item('expired')])).keys()]).toEqual([task.id]);
  });
});

describe('run budgets', () => {
  it('stop claiming after the push budget (Workers subrequests), leaving the rest pending', async () => {
    for (let i = 0; i < 5; i++) await enqueue();
    const report = await dispatchRun(
      { db: t.db, config: { ...config, dispatchParallelism: 4 }, keyring },
      { budgetMs: 5_000, maxPushes: 2 },
    );
    expect(report).toMatchObject({ claimed: 2, succeeded: 2 });
    const [left] = await t.db.query<{ n: number }>(`select count(*)::int as n from sluice.all_tasks where status = 'pending'`);
    expect(left!.n).toBe(3);
  });
});

describe('claim order', () => {
  it('is priority, then run_at, then id', async () => {
    const now = Date.now();
    const ids = [
      (await enqueue({ priority: 5 })).id,
      (await enqueue({ priority: 0, runAt: new Date(now - 1_000) })).id,
      (await enqueue({ priority: 0, runAt: new Date(now - 2_000) })).id,
      (await enqueue({ priority: -1 })).id,
      (await enqueue({ priority: 0, runAt: new Date(now - 2_000) })).id,
    ];
    await run({ dispatchParallelism: 1 });
    expect(endpoint.received.map((p) => p.headers['sluice-task-id'])).toEqual([ids[3], ids[2], ids[4], ids[1], ids[0]]);
  });
});
