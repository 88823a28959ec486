/**
 * Push signatures made synchronously with node:crypto (Node, Bun and Deno all have it): the
 * same keys and the same signatures as WebCrypto's, without a WebCrypto call's hand-off to a
 * thread and back, which is most of an idle push's signing time. The dispatcher of a
 * long-lived process uses it; the Worker signs with WebCrypto.
 */
import { KeyObject, sign } from 'node:crypto';
import type { Keyring } from '../security/keyring.ts';

export function withSyncSigning(keyring: Keyring): Keyring {
  const all = keyring.all.map((k) => {
    const key = KeyObject.from(k.key);
    // Ed25519 hashes inside the algorithm; ES256 signs a SHA-256 digest, as r ‖ s (JWS's form).
    const signSync =
      k.alg === 'EdDSA'
        ? (data: Uint8Array) => new Uint8Array(sign(null, data, key))
        : (data: Uint8Array) => new Uint8Array(sign('sha256', data, { key, dsaEncoding: 'ieee-p1363' }));
    return { ...k, signSync };
  });
  return { ...keyring, all, active: all[0] as Keyring['active'] };
}
