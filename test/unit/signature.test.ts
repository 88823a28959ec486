import { createLocalJWKSet } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { withSyncSigning } from '../../src/node/sync-signing.ts';
import { utf8 } from '../../src/protocol/encoding.ts';
import { type SignatureCheck, SignatureError, type SignPushInput, signPush, verifyPush } from '../../src/protocol/signature.ts';
import { generateSigningJwk, type Keyring, loadKeyring } from '../../src/security/keyring.ts';

const NOW = Date.parse('2026-11-21T12:00:00Z');
const URL_ = 'https://example.com/hooks/sluice';

let current: Keyring;
let next: Keyring;
let both: Keyring;
let stranger: Keyring;

beforeAll(async () => {
  const a = await generateSigningJwk('EdDSA', 'k-current');
  const b = await generateSigningJwk('ES256', 'k-next');
  current = await loadKeyring({ keys: [a] });
  next = await loadKeyring({ keys: [b] });
  both = await loadKeyring({ keys: [a, b] });
  stranger = await loadKeyring({ keys: [await generateSigningJwk('EdDSA', 'k-current')] });
});

const input = (overrides: Partial<SignPushInput> = {}): SignPushInput => ({
  key: current.active,
  issuer: 'sluice',
  taskId: '42',
  leaseId: '6f1c1a8e-3f7e-4c55-9a43-2f3e0e0e0e0e',
  url: URL_,
  body: utf8('{"hello":"world"}'),
  nowMs: NOW,
  ...overrides,
});

async function rejection(promise: Promise<unknown>): Promise<SignatureCheck> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(SignatureError);
  return (error as SignatureError).check;
}

describe('push signatures', () => {
  it('verify what they sign, returning the claims (round trip, frozen clock)', async () => {
    const token = await signPush(input());
    const claims = await verifyPush({
      token,
      keys: createLocalJWKSet(both.jwks),
      url: URL_,
      body: utf8('{"hello":"world"}'),
      nowMs: NOW + 1_000,
      issuer: 'sluice',
    });
    expect(claims).toMatchObject({ iss: 'sluice', sub: '42', aud: URL_, jti: input().leaseId, iat: NOW / 1000, exp: NOW / 1000 + 300 });
  });

  it('accept the next key during a rotation (ES256 as well as EdDSA)', async () => {
    const token = await signPush(input({ key: next.active }));
    await expect(
      verifyPush({ token, keys: createLocalJWKSet(both.jwks), url: URL_, body: input().body, nowMs: NOW }),
    ).resolves.toBeTruthy();
  });

  it('are the same signatures when node:crypto makes them synchronously (EdDSA and ES256)', async () => {
    const synced = withSyncSigning(both);
    for (const key of synced.all) {
      expect(key.signSync).toBeTypeOf('function');
      const token = await signPush(input({ key }));
      await expect(
        verifyPush({ token, keys: createLocalJWKSet(both.jwks), url: URL_, body: input().body, nowMs: NOW }),
      ).resolves.toMatchObject({ sub: '42' });
      // Same header and claims as WebCrypto's (signatures differ only for ES256, which is randomized).
      const plain = await signPush(input({ key: both.all.find((k) => k.kid === key.kid)! }));
      expect(token.split('.').slice(0, 2)).toEqual(plain.split('.').slice(0, 2));
      if (key.alg === 'EdDSA') expect(token).toBe(plain);
    }
    const forged = await signPush(input({ key: { ...both.active, signSync: () => new Uint8Array(64) } }));
    expect(
      await rejection(verifyPush({ token: forged, keys: createLocalJWKSet(both.jwks), url: URL_, body: input().body, nowMs: NOW })),
    ).toBe('signature');
  });

  it('reject a changed body', async () => {
    const token = await signPush(input());
    expect(
      await rejection(verifyPush({ token, keys: createLocalJWKSet(both.jwks), url: URL_, body: utf8('{"hello":"w0rld"}'), nowMs: NOW })),
    ).toBe('body');
  });

  it('reject another URL (aud)', async () => {
    const token = await signPush(input());
    expect(
      await rejection(
        verifyPush({ token, keys: createLocalJWKSet(both.jwks), url: 'https://evil.example/x', body: input().body, nowMs: NOW }),
      ),
    ).toBe('audience');
  });

  it('reject an expired signature, beyond the clock skew', async () => {
    const token = await signPush(input());
    const keys = createLocalJWKSet(both.jwks);
    await expect(verifyPush({ token, keys, url: URL_, body: input().body, nowMs: NOW + 320_000 })).resolves.toBeTruthy();
    expect(await rejection(verifyPush({ token, keys, url: URL_, body: input().body, nowMs: NOW + 331_000 }))).toBe('expired');
  });

  it('reject a signature from the future', async () => {
    const token = await signPush(input({ nowMs: NOW + 120_000 }));
    expect(await rejection(verifyPush({ token, keys: createLocalJWKSet(both.jwks), url: URL_, body: input().body, nowMs: NOW }))).toBe(
      'not_yet_valid',
    );
  });

  it('reject an unknown kid, and a known kid with the wrong key', async () => {
    const foreign = await signPush(input({ key: { ...next.active, kid: 'k-unknown' } }));
    expect(
      await rejection(verifyPush({ token: foreign, keys: createLocalJWKSet(both.jwks), url: URL_, body: input().body, nowMs: NOW })),
    ).toBe('unknown_key');
    const forged = await signPush(input({ key: stranger.active }));
    expect(
      await rejection(verifyPush({ token: forged, keys: createLocalJWKSet(current.jwks), url: URL_, body: input().body, nowMs: NOW })),
    ).toBe('signature');
  });

  it('reject a missing or garbled header', async () => {
    const keys = createLocalJWKSet(both.jwks);
    expect(await rejection(verifyPush({ token: null, keys, url: URL_, body: input().body, nowMs: NOW }))).toBe('malformed');
    expect(await rejection(verifyPush({ token: 'not.a.jws', keys, url: URL_, body: input().body, nowMs: NOW }))).toBe('malformed');
  });

  it('publish only public key material', () => {
    for (const key of both.jwks.keys) {
      expect(key).not.toHaveProperty('d');
      expect(key.kid).toBeTruthy();
      expect(key.use).toBe('sig');
    }
  });
});
