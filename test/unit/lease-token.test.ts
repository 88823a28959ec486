import { SignJWT } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { base64url, fromBase64, utf8 } from '../../src/protocol/encoding.ts';
import { generateSigningJwk, type Keyring, loadKeyring } from '../../src/security/keyring.ts';
import { signLeaseToken, verifyLeaseToken } from '../../src/security/lease-token.ts';

const NOW = Date.UTC(2026, 10, 23, 12);
const LEASE = { taskId: '42', leaseId: '6f1c1a8e-3f7e-4c55-9a43-2f3e0e0e0e0e' };
let current: Keyring;
let rotated: Keyring;
let stranger: Keyring;
let retired: Keyring;

beforeAll(async () => {
  const [a, b, c] = await Promise.all([
    generateSigningJwk('EdDSA', 'a'),
    generateSigningJwk('ES256', 'b'),
    generateSigningJwk('EdDSA', 'a'),
  ]);
  current = await loadKeyring({ keys: [a] });
  rotated = await loadKeyring({ keys: [b, a] });
  retired = await loadKeyring({ keys: [b] });
  // Same kid, another key: a token must not verify by its kid alone.
  stranger = await loadKeyring({ keys: [c] });
});

const sign = (ring: Keyring, expiresAtMs = NOW + 60_000, issuer = 'sluice') => signLeaseToken(ring, LEASE, expiresAtMs, issuer);

describe('lease tokens', () => {
  it('name the lease and task they were issued for', async () => {
    expect(await verifyLeaseToken(current, await sign(current), 'sluice', NOW)).toEqual(LEASE);
  });

  it('stay valid after a rotation while their key is listed, and not after', async () => {
    const old = await sign(current);
    expect(await verifyLeaseToken(rotated, old, 'sluice', NOW)).toEqual(LEASE);
    expect(await verifyLeaseToken(retired, await sign(rotated), 'sluice', NOW)).toEqual(LEASE);
    expect(await verifyLeaseToken(retired, old, 'sluice', NOW)).toBeNull();
  });

  it('are refused when expired, for another issuer, or under another key of the same kid', async () => {
    expect(await verifyLeaseToken(current, await sign(current, NOW), 'sluice', NOW)).toBeNull();
    expect(await verifyLeaseToken(current, await sign(current), 'other', NOW)).toBeNull();
    expect(await verifyLeaseToken(stranger, await sign(current), 'sluice', NOW)).toBeNull();
  });

  it('issued before the MAC (a JWS signed with the signing key) still verify, and only when valid', async () => {
    const legacy = (ring: Keyring, overrides: { exp?: number; aud?: string } = {}) =>
      new SignJWT({})
        .setProtectedHeader({ alg: ring.active.alg, kid: ring.active.kid, typ: 'sluice-lease+jwt' })
        .setIssuer('sluice')
        .setAudience(overrides.aud ?? 'sluice:lease')
        .setSubject(LEASE.taskId)
        .setJti(LEASE.leaseId)
        .setIssuedAt(NOW / 1000)
        .setExpirationTime(overrides.exp ?? NOW / 1000 + 60)
        .sign(ring.active.key);
    expect(await verifyLeaseToken(current, await legacy(current), 'sluice', NOW)).toEqual(LEASE);
    expect(await verifyLeaseToken(current, await legacy(current, { exp: NOW / 1000 }), 'sluice', NOW)).toBeNull();
    expect(await verifyLeaseToken(current, await legacy(current, { aud: 'https://example.com' }), 'sluice', NOW)).toBeNull();
    expect(await verifyLeaseToken(current, await legacy(stranger), 'sluice', NOW)).toBeNull();
  });

  it('are refused when any part is changed', async () => {
    const token = await sign(current);
    const [body, mac] = token.split('.') as [string, string];
    const claims = JSON.parse(new TextDecoder().decode(fromBase64(body)));
    const forged = base64url(utf8(JSON.stringify({ ...claims, jti: 'another-lease' })));
    expect(await verifyLeaseToken(current, `${forged}.${mac}`, 'sluice', NOW)).toBeNull();
    const flipped = mac.startsWith('A') ? `B${mac.slice(1)}` : `A${mac.slice(1)}`;
    expect(await verifyLeaseToken(current, `${body}.${flipped}`, 'sluice', NOW)).toBeNull();
    for (const garbage of ['', '.', 'abc', `${body}.${mac}.x`, 'not base64!.x', `${base64url(utf8('[]'))}.${mac}`]) {
      expect(await verifyLeaseToken(current, garbage, 'sluice', NOW)).toBeNull();
    }
  });
});
