/**
 * Lease tokens (`Sluice-Lease-Token`): a JWS that names one lease and one task, signed with
 * the active signing key. It authorizes calls on that lease only; the database's
 * compare-and-set on the lease id decides whether the lease is still held.
 */
import { jwtVerify, SignJWT } from 'jose';
import type { Keyring } from './keyring.ts';

const AUDIENCE = 'sluice:lease';
const TYP = 'sluice-lease+jwt';

export interface LeaseTokenClaims {
  taskId: string;
  leaseId: string;
}

export async function signLeaseToken(keyring: Keyring, claims: LeaseTokenClaims, expiresAtMs: number, issuer: string): Promise<string> {
  const { active } = keyring;
  return new SignJWT({})
    .setProtectedHeader({ alg: active.alg, kid: active.kid, typ: TYP })
    .setIssuer(issuer)
    .setAudience(AUDIENCE)
    .setSubject(claims.taskId)
    .setJti(claims.leaseId)
    .setIssuedAt()
    .setExpirationTime(Math.ceil(expiresAtMs / 1000))
    .sign(active.key);
}

/** The lease a token names, or `null` when it is not a valid, unexpired lease token of ours. */
export async function verifyLeaseToken(keyring: Keyring, token: string, issuer: string, nowMs: number): Promise<LeaseTokenClaims | null> {
  try {
    const { payload } = await jwtVerify(token, keyring.verifier, {
      algorithms: keyring.all.map((k) => k.alg),
      audience: AUDIENCE,
      issuer,
      currentDate: new Date(nowMs),
      typ: TYP,
      requiredClaims: ['sub', 'jti', 'exp'],
    });
    return { taskId: payload.sub as string, leaseId: payload.jti as string };
  } catch {
    return null;
  }
}
