/** The receiver against tampered pushes: each is refused, naming the check that failed. */
import { beforeAll, describe, expect, it } from 'vitest';
import { utf8 } from '../../src/protocol/encoding.ts';
import { HEADERS } from '../../src/protocol/headers.ts';
import { type SignatureCheck, SignatureError, signPush } from '../../src/protocol/signature.ts';
import { createReceiver } from '../../src/sdk/receiver.ts';
import { generateSigningJwk, type Keyring, loadKeyring } from '../../src/security/keyring.ts';

const NOW = Date.parse('2026-11-21T12:00:00Z');
const URL_ = 'https://hooks.example.com/sluice';
let ring: Keyring;
let other: Keyring;

beforeAll(async () => {
  ring = await loadKeyring({ keys: [await generateSigningJwk('EdDSA', 'current'), await generateSigningJwk('ES256', 'next')] });
  other = await loadKeyring({ keys: [await generateSigningJwk('EdDSA', 'stranger')] });
});

async function push(options: { body?: string; url?: string; signedAt?: number; key?: Keyring['active']; leaseId?: string } = {}) {
  const body = options.body ?? '{"n":1}';
  const leaseId = options.leaseId ?? crypto.randomUUID();
  const signature = await signPush({
    key: options.key ?? ring.active,
    issuer: 'sluice',
    taskId: '7',
    leaseId,
    url: URL_,
    body: utf8('{"n":1}'),
    nowMs: options.signedAt ?? NOW,
  });
  return new Request(options.url ?? URL_, {
    method: 'POST',
    body,
    headers: {
      [HEADERS.signature]: signature,
      [HEADERS.taskId]: '7',
      [HEADERS.queue]: 'q',
      [HEADERS.concurrencyKey]: encodeURIComponent('café tenant'),
      [HEADERS.attempt]: '2',
      [HEADERS.maxAttempts]: '5',
      [HEADERS.leaseId]: leaseId,
      [HEADERS.leaseExpiresAt]: new Date(NOW + 60_000).toISOString(),
      [HEADERS.leaseToken]: 'token',
    },
  });
}

const receiver = (extra: Parameters<typeof createReceiver>[0] = {}) => createReceiver({ keys: ring.jwks, now: () => NOW, ...extra });

async function refusal(request: Promise<Request>, r = receiver()): Promise<SignatureCheck> {
  const error = await r.verify(await request).then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(SignatureError);
  return (error as SignatureError).check;
}

describe('the receiver', () => {
  it('returns the task and its lease from a genuine push', async () => {
    const got = await receiver().verify(await push());
    expect(got).toMatchObject({
      taskId: '7',
      queue: 'q',
      concurrencyKey: 'café tenant',
      attempt: 2,
      maxAttempts: 5,
      lease: { token: 'token' },
    });
    expect(got.json()).toEqual({ n: 1 });
  });

  it('accepts the next key of a rotation', async () => {
    await expect(receiver().verify(await push({ key: ring.all[1]! }))).resolves.toBeTruthy();
  });

  it('refuses a changed body', async () => {
    expect(await refusal(push({ body: '{"n":2}' }))).toBe('body');
  });

  it('refuses a push sent to (or replayed at) another URL', async () => {
    expect(await refusal(push({ url: 'https://evil.example.com/sluice' }))).toBe('audience');
  });

  it('accepts a rewritten URL when told the public one (proxies)', async () => {
    const r = receiver({ url: URL_ });
    await expect(r.verify(await push({ url: 'http://10.0.0.5:8080/internal' }))).resolves.toBeTruthy();
  });

  it('refuses an expired push', async () => {
    expect(await refusal(push({ signedAt: NOW - 400_000 }))).toBe('expired');
  });

  it('refuses an unknown kid and a forged signature', async () => {
    expect(await refusal(push({ key: other.active }))).toBe('unknown_key');
    expect(await refusal(push({ key: { ...other.active, kid: 'current' } }))).toBe('signature');
  });

  it('refuses a push signed in the future, and a foreign issuer when one is required', async () => {
    expect(await refusal(push({ signedAt: NOW + 120_000 }))).toBe('not_yet_valid');
    expect(await refusal(push(), receiver({ issuer: 'someone-else' }))).toBe('issuer');
  });

  it('refuses a request without a signature before reading its body', async () => {
    const bare = new Request(URL_, { method: 'POST', body: 'x'.repeat(10) });
    expect(await refusal(Promise.resolve(bare))).toBe('malformed');
    expect(bare.bodyUsed).toBe(false);
  });

  it('refuses a replay of a push it already accepted (after completion, say)', async () => {
    const r = receiver();
    const leaseId = crypto.randomUUID();
    await r.verify(await push({ leaseId }));
    expect(await refusal(push({ leaseId }), r)).toBe('replay');
  });
});

describe('a receiver made without its keys', () => {
  it('is made all the same (a framework may load the module without its configuration), and says what is missing at the first push', async () => {
    const receiver = createReceiver({});
    await expect(receiver.verify(await push())).rejects.toThrow('createReceiver needs sluiceUrl, jwksUrl or keys');
  });
});
