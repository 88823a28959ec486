/**
 * Lease tokens (`Sluice-Lease-Token`): a token that names one lease of one task, good until the
 * longest that lease can be held. It authorizes calls on that lease only; the database's
 * compare-and-set on the lease id decides whether the lease is still held.
 *
 * Only Sluice issues and checks them, so they carry a MAC, not a signature: HMAC-SHA-256 under a
 * key derived (HKDF) from a signing key, whose `kid` the token names; computed in JavaScript
 * (@noble/hashes), at once, as a few microseconds of work is cheaper than a WebCrypto call's
 * hand-off to a thread and back. Rotating the signing keys
 * keeps issued tokens valid while the old key is still listed. Form:
 * `base64url(JSON {kid, iss, sub: task id, jti: lease id, exp}) "." base64url(MAC of the first part)`.
 */

import { hkdf } from '@noble/hashes/hkdf.js';
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { type JWTVerifyGetKey, jwtVerify } from 'jose';
import { base64url, fromBase64, timingSafeEqual, utf8 } from '../protocol/encoding.ts';

/**
 * What lease tokens need of the keyring (security/keyring.ts, which derives `leaseKeys` with
 * `deriveLeaseKey` below): the active key's id, the MAC keys by id, and, for tokens of the older
 * JWS form, the verifier and the algorithms.
 */
export interface LeaseKeyring {
  active: { kid: string };
  all: readonly { alg: string }[];
  verifier: JWTVerifyGetKey;
  leaseKeys: ReadonlyMap<string, Uint8Array>;
}

export interface LeaseTokenClaims {
  taskId: string;
  leaseId: string;
}

interface Payload {
  kid: string;
  iss: string;
  sub: string;
  jti: string;
  exp: number;
}

/** The MAC key for lease tokens, derived from a signing key's private part (`d` of its JWK). */
export function deriveLeaseKey(privateD: string): Uint8Array {
  return hkdf(sha256, fromBase64(privateD), utf8('sluice'), utf8('sluice lease token v1'), 32);
}

export async function signLeaseToken(
  keyring: LeaseKeyring,
  claims: LeaseTokenClaims,
  expiresAtMs: number,
  issuer: string,
): Promise<string> {
  const { kid } = keyring.active;
  const payload: Payload = { kid, iss: issuer, sub: claims.taskId, jti: claims.leaseId, exp: Math.ceil(expiresAtMs / 1000) };
  const body = base64url(utf8(JSON.stringify(payload)));
  return `${body}.${base64url(hmac(sha256, keyring.leaseKeys.get(kid) as Uint8Array, utf8(body)))}`;
}

/** The lease a token names, or `null` when it is not a valid, unexpired lease token of ours. */
export async function verifyLeaseToken(
  keyring: LeaseKeyring,
  token: string,
  issuer: string,
  nowMs: number,
): Promise<LeaseTokenClaims | null> {
  const [body, mac, ...rest] = token.split('.');
  if (rest.length === 1) return verifyJwsLeaseToken(keyring, token, issuer, nowMs);
  if (!body || !mac || rest.length > 0) return null;
  try {
    const payload = JSON.parse(new TextDecoder().decode(fromBase64(body))) as Partial<Payload>;
    const key = typeof payload.kid === 'string' ? keyring.leaseKeys.get(payload.kid) : undefined;
    if (!key || !timingSafeEqual(hmac(sha256, key, utf8(body)), fromBase64(mac))) return null;
    if (payload.iss !== issuer || typeof payload.sub !== 'string' || typeof payload.jti !== 'string') return null;
    if (typeof payload.exp !== 'number' || payload.exp * 1000 <= nowMs) return null;
    return { taskId: payload.sub, leaseId: payload.jti };
  } catch {
    // Not base64url, not JSON: not a token of ours.
    return null;
  }
}

/**
 * Lease tokens issued before they carried a MAC: a JWS signed with the signing key. Leases
 * taken before an upgrade may be held for up to `SLUICE_MAX_LEASE_MS` after it, and their
 * handlers still heartbeat and end them with these. Remove once no such lease can be live.
 */
async function verifyJwsLeaseToken(keyring: LeaseKeyring, token: string, issuer: string, nowMs: number): Promise<LeaseTokenClaims | null> {
  try {
    const { payload } = await jwtVerify(token, keyring.verifier, {
      algorithms: keyring.all.map((k) => k.alg),
      audience: 'sluice:lease',
      issuer,
      currentDate: new Date(nowMs),
      typ: 'sluice-lease+jwt',
      requiredClaims: ['sub', 'jti', 'exp'],
    });
    return { taskId: payload.sub as string, leaseId: payload.jti as string };
  } catch {
    return null;
  }
}
