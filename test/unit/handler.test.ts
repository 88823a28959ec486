/** The handler's lease mode against a recorded lease API: heartbeats, endings, error mapping. */
import { beforeAll, describe, expect, it } from 'vitest';
import { utf8 } from '../../src/protocol/encoding.ts';
import { HEADERS } from '../../src/protocol/headers.ts';
import { signPush } from '../../src/protocol/signature.ts';
import { createHandler, NonRetriableError, RetryAfterError } from '../../src/sdk/index.ts';
import { generateSigningJwk, type Keyring, loadKeyring } from '../../src/security/keyring.ts';

const URL_ = 'https://hooks.example.com/long';
let ring: Keyring;
beforeAll(async () => {
  ring = await loadKeyring({ keys: [await generateSigningJwk('EdDSA', 'k1')] });
});

async function push(leaseMs: number): Promise<Request> {
  const leaseId = crypto.randomUUID();
  const signature = await signPush({
    key: ring.active,
    issuer: 'sluice',
    taskId: '9',
    leaseId,
    url: URL_,
    body: utf8('{}'),
    nowMs: Date.now(),
  });
  return new Request(URL_, {
    method: 'POST',
    body: '{}',
    headers: {
      [HEADERS.signature]: signature,
      [HEADERS.leaseId]: leaseId,
      [HEADERS.leaseToken]: 'token',
      [HEADERS.leaseExpiresAt]: new Date(Date.now() + leaseMs).toISOString(),
    },
  });
}

/** A fake lease API that records each call and answers like Sluice. */
function recorder(leaseMs: number) {
  const calls: Array<{ action: string; at: number; body: Record<string, unknown>; headers: Headers }> = [];
  const fetchImpl = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const action = String(input).split('/').at(-1)!;
    calls.push({ action, at: Date.now(), body: JSON.parse(String(init?.body ?? '{}')), headers: new Headers(init?.headers) });
    if (action === 'heartbeat') return Response.json({ expires_at: new Date(Date.now() + leaseMs).toISOString() });
    return Response.json({ status: 'ok' });
  }) as typeof fetch;
  return { calls, fetchImpl };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('createHandler in lease mode', () => {
  it("sends the push's traceparent with its lease calls (they are spans under the attempt), and none without one", async () => {
    for (const traceparent of ['00-4bf92f3577b34da6a3ce929d0e0e4736-9b2a4c1e7f3d4e21-01', null]) {
      const { calls, fetchImpl } = recorder(60_000);
      const work: Promise<unknown>[] = [];
      const handler = createHandler(async () => 'done', {
        keys: ring.jwks,
        sluiceUrl: 'https://sluice.example',
        mode: 'lease',
        fetch: fetchImpl,
      });
      const request = await push(60_000);
      if (traceparent) request.headers.set('traceparent', traceparent);
      await handler(request, { waitUntil: (p) => work.push(p) });
      await Promise.all(work);
      expect(calls.map((c) => [c.action, c.headers.get('traceparent')])).toEqual([['complete', traceparent]]);
    }
  });

  it('answers 202 Sluice-Ack: lease at once, heartbeats while working, completes, and then stops heartbeating', async () => {
    const { calls, fetchImpl } = recorder(900);
    const work: Promise<unknown>[] = [];
    const handler = createHandler(
      async () => {
        await sleep(1_200);
        return { ok: true };
      },
      { keys: ring.jwks, sluiceUrl: 'https://sluice.example', mode: 'lease', fetch: fetchImpl },
    );
    const res = await handler(await push(900), { waitUntil: (p) => work.push(p) });
    expect(res.status).toBe(202);
    expect(res.headers.get('sluice-ack')).toBe('lease');
    await Promise.all(work);
    const complete = calls.find((c) => c.action === 'complete')!;
    expect(complete.body).toEqual({ result: { ok: true } });
    expect(calls.filter((c) => c.action === 'heartbeat').length).toBeGreaterThanOrEqual(2);
    const count = calls.length;
    await sleep(800);
    expect(calls.length).toBe(count);
  });

  it('maps NonRetriableError to fail without retry, RetryAfterError to release, and cleans what it sends', async () => {
    for (const [thrown, action, body] of [
      [new NonRetriableError(`bad\u0000${'x'.repeat(3_000)}`), 'fail', { retry: false }],
      [new RetryAfterError(1_500.4), 'release', { delay_ms: 1_501 }],
      [new Error('flaky'), 'fail', { error: 'flaky', retry: true }],
    ] as const) {
      const { calls, fetchImpl } = recorder(60_000);
      const work: Promise<unknown>[] = [];
      const handler = createHandler(
        async () => {
          throw thrown;
        },
        { keys: ring.jwks, sluiceUrl: 'https://sluice.example', mode: 'lease', fetch: fetchImpl },
      );
      await handler(await push(60_000), { waitUntil: (p) => work.push(p) });
      await Promise.all(work);
      const ending = calls.find((c) => c.action !== 'heartbeat')!;
      expect(ending.action).toBe(action);
      expect(ending.body).toMatchObject(body);
      if (action === 'fail') expect(String(ending.body.error).length).toBeLessThanOrEqual(2_000);
      expect(String(ending.body.error ?? '')).not.toContain('\u0000');
    }
  });

  it('aborts the work when a heartbeat says the lease is lost, and sends no ending', async () => {
    const calls: string[] = [];
    const fetchImpl = (async (input: RequestInfo | URL) => {
      calls.push(String(input).split('/').at(-1)!);
      return Response.json({ code: 'lease_lost' }, { status: 409 });
    }) as typeof fetch;
    let reason = '';
    const work: Promise<unknown>[] = [];
    const handler = createHandler(
      (_push, ctx) =>
        new Promise((_, reject) => {
          ctx.signal.addEventListener('abort', () => {
            reason = String((ctx.signal.reason as Error).message);
            reject(ctx.signal.reason);
          });
        }),
      { keys: ring.jwks, sluiceUrl: 'https://sluice.example', mode: 'lease', fetch: fetchImpl },
    );
    await handler(await push(900), { waitUntil: (p) => work.push(p) });
    await Promise.all(work);
    expect(reason).toBe('lease ended: lease_lost');
    expect(calls).toEqual(['heartbeat']);
  });
});

describe('createHandler in respond mode', () => {
  it('answers 503 Retry-After for RetryAfterError and 422 Sluice-Retry: false for NonRetriableError', async () => {
    const later = createHandler(
      () => {
        throw new RetryAfterError(2_500);
      },
      { keys: ring.jwks },
    );
    const res = await later(await push(60_000));
    expect([res.status, res.headers.get('retry-after')]).toEqual([503, '3']);
    const never = createHandler(
      () => {
        throw new NonRetriableError('no');
      },
      { keys: ring.jwks },
    );
    const res2 = await never(await push(60_000));
    expect([res2.status, res2.headers.get('sluice-retry')]).toEqual([422, 'false']);
  });
});
