/**
 * Sluice's signing keys: the private JWKS in `SLUICE_SIGNING_KEYS`. The first key signs; every
 * key is published at `/.well-known/jwks.json`, so a receiver accepts the current and the next
 * (or previous) key during a rotation.
 */
import { createLocalJWKSet, exportJWK, generateKeyPair, importJWK, type JWK, type JWTVerifyGetKey } from 'jose';
import { SIGNATURE_ALGORITHMS, type SignatureAlgorithm, type SigningKey } from '../protocol/signature.ts';
import { deriveForwardKey } from './forwarding.ts';
import { deriveLeaseKey } from './lease-token.ts';

export interface Keyring {
  /** The key that signs pushes (and whose derived key MACs lease tokens). */
  active: SigningKey;
  all: readonly SigningKey[];
  /** Public keys, as served at `/.well-known/jwks.json`. */
  jwks: { keys: JWK[] };
  /** Finds the public key for a token's `kid`, for Sluice's own verifications. */
  verifier: JWTVerifyGetKey;
  /** Per `kid`, the MAC key of lease tokens (security/lease-token.ts). */
  leaseKeys: ReadonlyMap<string, Uint8Array>;
  /**
   * The keys of forwarded pushes (security/forwarding.ts): the active key's counterpart signs;
   * every key's is published at FORWARD_JWKS_PATH, never in `jwks`.
   */
  forward: { active: SigningKey; jwks: { keys: JWK[] } };
}

const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k'] as const;

/** Checks the shape of a private JWKS; returns problems as messages (empty when fine). */
export function signingKeyProblems(jwks: unknown): string[] {
  const keys = (jwks as { keys?: unknown })?.keys;
  if (!Array.isArray(keys) || keys.length === 0) return ['must be a JSON Web Key Set with at least one key: {"keys":[…]}'];
  const problems: string[] = [];
  const kids = new Set<string>();
  keys.forEach((k: JWK, i) => {
    if (typeof k?.kid !== 'string' || k.kid === '') problems.push(`keys[${i}] needs a "kid"`);
    else if (kids.has(k.kid)) problems.push(`keys[${i}]: kid "${k.kid}" is used twice`);
    else kids.add(k.kid);
    if (!SIGNATURE_ALGORITHMS.includes(k?.alg as SignatureAlgorithm))
      problems.push(`keys[${i}].alg must be one of ${SIGNATURE_ALGORITHMS.join(', ')}`);
    else if (k.crv !== (k.alg === 'EdDSA' ? 'Ed25519' : 'P-256'))
      problems.push(`keys[${i}].crv must be ${k.alg === 'EdDSA' ? 'Ed25519' : 'P-256'} for ${k.alg}`);
    if (typeof k?.d !== 'string') problems.push(`keys[${i}] is not a private key (no "d")`);
  });
  return problems;
}

const cache = new Map<string, Promise<Keyring>>();

/** Imports a validated private JWKS (cached per isolate: importing costs a little every time). */
export function loadKeyring(jwks: { keys: JWK[] }): Promise<Keyring> {
  const cacheKey = JSON.stringify(jwks);
  let ring = cache.get(cacheKey);
  if (!ring) {
    ring = importKeyring(jwks);
    cache.set(cacheKey, ring);
    ring.catch(() => cache.delete(cacheKey));
  }
  return ring;
}

async function importKeyring(jwks: { keys: JWK[] }): Promise<Keyring> {
  const all = await Promise.all(
    jwks.keys.map(async (jwk) => {
      const alg = jwk.alg as SignatureAlgorithm;
      const key = await importJWK(jwk, alg);
      return { kid: jwk.kid as string, alg, key: key as SigningKey['key'] };
    }),
  );
  const publicKeys = jwks.keys.map((jwk) => {
    const pub: JWK = { ...jwk, use: 'sig' };
    for (const member of PRIVATE_MEMBERS) delete pub[member];
    delete pub.key_ops;
    delete pub.ext;
    return pub;
  });
  const leaseKeys = new Map(
    await Promise.all(jwks.keys.map(async (jwk) => [jwk.kid as string, await deriveLeaseKey(jwk.d as string)] as const)),
  );
  const forward = await Promise.all(jwks.keys.map(deriveForwardKey));
  return {
    active: all[0] as SigningKey,
    all,
    jwks: { keys: publicKeys },
    verifier: createLocalJWKSet({ keys: publicKeys }),
    leaseKeys,
    forward: { active: forward[0]!.signing, jwks: { keys: forward.map((f) => f.publicJwk) } },
  };
}

/** A fresh private JWK for `SLUICE_SIGNING_KEYS`. */
export async function generateSigningJwk(alg: SignatureAlgorithm = 'EdDSA', kid?: string): Promise<JWK> {
  const { privateKey } = await generateKeyPair(alg, { extractable: true, ...(alg === 'EdDSA' ? { crv: 'Ed25519' } : {}) });
  const jwk = await exportJWK(privateKey);
  return { ...jwk, alg, kid: kid ?? `${alg.toLowerCase()}-${new Date().toISOString().slice(0, 10)}-${crypto.randomUUID().slice(0, 8)}` };
}
