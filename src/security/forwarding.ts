/**
 * Forwarded pushes (`push_to` of a pull, `sluice listen --forward-to`): the push a pull consumer
 * hands to a handler on its own machine, so a handler written for pushes runs unchanged. It is
 * signed, but never as a production push (docs/DESIGN.md §8, SECURITY.md), as Stripe's CLI signs
 * the events it forwards with a secret of its own:
 * - its JWS is made with forwarding keys, derived from the signing keys and published apart
 *   (FORWARD_JWKS_PATH), under the issuer FORWARD_ISSUER; `/.well-known/jwks.json` never lists them;
 * - its Standard Webhooks signature is made with a forwarding secret per endpoint, derived from
 *   the master under a label of its own, so it is no endpoint's secret
 *   (security/webhook-secrets.ts `forwardWebhookKey`);
 * - it may go only to a loopback URL, or to an origin the API key lists in `forward_to`.
 */

import { hkdf } from '@noble/hashes/hkdf.js';
import { sha256 } from '@noble/hashes/sha2.js';
import type { JWK } from 'jose';
import { fromBase64, utf8 } from '../protocol/encoding.ts';
import type { SigningKey } from '../protocol/signature.ts';

/** A signing key's forwarding counterpart: the key that signs, and its public JWK. */
export interface ForwardKey {
  signing: SigningKey;
  publicJwk: JWK;
}

/** The `kid` of the forwarding key derived from the signing key `kid`. */
export const forwardKid = (kid: string) => `${kid}.forward`;

/** An Ed25519 private key in PKCS #8 is this DER prefix followed by its 32-byte seed (RFC 8410). */
const ED25519_PKCS8_PREFIX = [0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20];

/**
 * The forwarding key of a private signing JWK: an Ed25519 key whose seed is derived (HKDF) from
 * the signing key's private part, so every instance of a deployment derives the same key with
 * nothing more to configure, and it rotates with the signing keys.
 */
export async function deriveForwardKey(jwk: JWK): Promise<ForwardKey> {
  const seed = hkdf(sha256, fromBase64(jwk.d as string), utf8('sluice'), utf8('sluice forward key v1'), 32);
  const der = new Uint8Array(ED25519_PKCS8_PREFIX.length + seed.length);
  der.set(ED25519_PKCS8_PREFIX);
  der.set(seed, ED25519_PKCS8_PREFIX.length);
  const key = await crypto.subtle.importKey('pkcs8', der, { name: 'Ed25519' }, true, ['sign']);
  const { x } = await crypto.subtle.exportKey('jwk', key);
  const kid = forwardKid(jwk.kid as string);
  return {
    signing: { kid, alg: 'EdDSA', key },
    publicJwk: { kty: 'OKP', crv: 'Ed25519', x: x as string, kid, alg: 'EdDSA', use: 'sig' },
  };
}

/**
 * Why a pull may not be forwarded to `url`, or `null` when it may: only to this machine
 * (127.0.0.0/8, [::1], localhost), unless the API key lists the URL's origin in `forward_to`.
 */
export function forwardTargetProblem(url: string, allowedOrigins: readonly string[]): string | null {
  const parsed = URL.canParse(url) ? new URL(url) : null;
  if (!parsed || !/^https?:$/.test(parsed.protocol)) return 'must be an http or https URL';
  if (parsed.username || parsed.password) return 'must not carry credentials';
  if (parsed.hash) return 'must not have a fragment (#…): it is never sent, so the signature could not match';
  if (isLoopbackHost(parsed.hostname) || allowedOrigins.includes(parsed.origin)) return null;
  return `must be a loopback URL (127.0.0.0/8, [::1] or localhost), or an origin this API key lists in "forward_to" of SLUICE_API_KEYS; ${parsed.origin} is neither`;
}

function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase();
  if (host === 'localhost' || host === '[::1]') return true;
  // The URL parser has already made every IPv4 spelling dotted decimal.
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
