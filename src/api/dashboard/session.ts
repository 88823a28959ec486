/**
 * Dashboard sessions. An admin key logs in once (a form POST, never a URL); the answer is a
 * cookie that names the key (its `name` and a prefix of its hash) and an expiry, MACed with
 * HMAC-SHA-256 under a key derived (HKDF) from a signing key's private part, as lease tokens
 * are (security/lease-token.ts), with a purpose of its own, so neither can stand for the other.
 *
 * Stateless: nothing is stored. Every request checks the MAC, the expiry, and that the key it
 * names is still in `SLUICE_API_KEYS` with the `admin` scope, so removing or replacing a key ends
 * its sessions at once; rotating the signing keys out ends them all. Logging out clears the cookie
 * in that browser (a copy taken before stays valid until it expires: 12 h).
 *
 * Form: `base64url(JSON {kid, sub: key name, fp: first 16 hex of its SHA-256, exp}) "." base64url(MAC)`.
 */
import { hkdf } from '@noble/hashes/hkdf.js';
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';
import type { JWK } from 'jose';
import { base64url, fromBase64, timingSafeEqual, utf8 } from '../../protocol/encoding.ts';
import type { ApiKeyEntry } from '../../security/api-keys.ts';

export const SESSION_COOKIE = 'sluice_session';
export const SESSION_TTL_MS = 12 * 3_600_000;

interface Payload {
  kid: string;
  sub: string;
  fp: string;
  exp: number;
}

const derived = new Map<string, Uint8Array>();

/** The MAC key for sessions, derived from a signing key's private part (`d` of its JWK). */
export function deriveSessionKey(privateD: string): Uint8Array {
  let key = derived.get(privateD);
  if (!key) {
    key = hkdf(sha256, fromBase64(privateD), utf8('sluice'), utf8('sluice dashboard session v1'), 32);
    derived.set(privateD, key);
  }
  return key;
}

function fingerprint(entry: ApiKeyEntry): string {
  return entry.sha256.slice(0, 16);
}

function sessionKey(signingKeys: { keys: JWK[] }, kid: string): Uint8Array | null {
  const jwk = signingKeys.keys.find((k) => k.kid === kid);
  return typeof jwk?.d === 'string' ? deriveSessionKey(jwk.d) : null;
}

/** A session for `entry`, MACed under the active (first) signing key, good for `SESSION_TTL_MS`. */
export function signSession(signingKeys: { keys: JWK[] }, entry: ApiKeyEntry, nowMs: number): string {
  const kid = signingKeys.keys[0]?.kid as string;
  const payload: Payload = { kid, sub: entry.name, fp: fingerprint(entry), exp: Math.floor((nowMs + SESSION_TTL_MS) / 1000) };
  const body = base64url(utf8(JSON.stringify(payload)));
  return `${body}.${base64url(hmac(sha256, sessionKey(signingKeys, kid) as Uint8Array, utf8(body)))}`;
}

/**
 * The admin key a session names, or `null` when it is not ours, has expired, or its key is gone,
 * no longer admin, or now limited to queues (the dashboard shows every queue).
 */
export function verifySession(
  signingKeys: { keys: JWK[] },
  apiKeys: readonly ApiKeyEntry[],
  token: string,
  nowMs: number,
): ApiKeyEntry | null {
  const [body, mac, ...rest] = token.split('.');
  if (!body || !mac || rest.length > 0) return null;
  try {
    const payload = JSON.parse(new TextDecoder().decode(fromBase64(body))) as Partial<Payload>;
    const key = typeof payload.kid === 'string' ? sessionKey(signingKeys, payload.kid) : null;
    if (!key || !timingSafeEqual(hmac(sha256, key, utf8(body)), fromBase64(mac))) return null;
    if (typeof payload.exp !== 'number' || payload.exp * 1000 <= nowMs) return null;
    const entry = apiKeys.find((e) => e.name === payload.sub && fingerprint(e) === payload.fp);
    return entry?.scopes.includes('admin') && !entry.queues ? entry : null;
  } catch {
    // Not base64url, not JSON: not a session of ours.
    return null;
  }
}
