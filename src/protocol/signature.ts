/**
 * The push signature (`Sluice-Signature`): a compact JWS over the push's claims. `signPush`
 * and `verifyPush` are exact inverses; both take the clock as an argument.
 *
 * Claims: iss, sub = task id, aud = target URL, iat, exp (≤ 5 min after iat),
 * jti = lease id, body = base64url(SHA-256(exact body bytes)).
 */
import { type CryptoKey, errors, type JWTVerifyGetKey, jwtVerify } from 'jose';
import { base64url, fromBase64, sha256Base64url, utf8 } from './encoding.ts';

export const SIGNATURE_ALGORITHMS = ['EdDSA', 'ES256'] as const;
export type SignatureAlgorithm = (typeof SIGNATURE_ALGORITHMS)[number];

/** The longest a push signature is valid. */
export const MAX_SIGNATURE_TTL_SECONDS = 300;

/**
 * The issuer of a forwarded push: one a pull consumer (`sluice listen --forward-to`) hands to a
 * handler on its own machine. It is signed with keys of its own, published apart at
 * `FORWARD_JWKS_PATH` (never at `/.well-known/jwks.json`), so a production receiver never takes
 * it for a push of Sluice's; the SDK's receiver takes it only with `acceptForwarded`.
 */
export const FORWARD_ISSUER = 'sluice-forward';
export const FORWARD_JWKS_PATH = '/.well-known/forward-jwks.json';

export interface PushClaims {
  iss: string;
  /** Task id. */
  sub: string;
  /** The URL the push was sent to. */
  aud: string;
  iat: number;
  exp: number;
  /** Lease id. */
  jti: string;
  /** base64url SHA-256 of the exact body bytes. */
  body: string;
}

export interface SigningKey {
  kid: string;
  alg: SignatureAlgorithm;
  key: CryptoKey;
  /**
   * The same key's signature made synchronously, where the runtime offers it (Node:
   * src/node/sync-signing.ts); else WebCrypto signs, at the cost of a hand-off to a thread and back.
   */
  signSync?: (data: Uint8Array) => Uint8Array;
}

const WEBCRYPTO_PARAMS: Record<SignatureAlgorithm, AlgorithmIdentifier | EcdsaParams> = {
  EdDSA: 'Ed25519',
  // WebCrypto's ECDSA signature is r ‖ s, as JWS wants it.
  ES256: { name: 'ECDSA', hash: 'SHA-256' },
};

export interface SignPushInput {
  key: SigningKey;
  issuer: string;
  taskId: string;
  leaseId: string;
  url: string;
  body: Uint8Array<ArrayBuffer>;
  nowMs: number;
  ttlSeconds?: number;
}

/** Each key's encoded JWS header, the same for every push it signs. */
const encodedHeaders = new WeakMap<SigningKey, string>();

function encodedHeader(key: SigningKey): string {
  let header = encodedHeaders.get(key);
  if (header === undefined) {
    header = base64url(utf8(JSON.stringify({ alg: key.alg, kid: key.kid, typ: 'JWT' })));
    encodedHeaders.set(key, header);
  }
  return header;
}

/** A compact JWS (RFC 7515) over the push's claims, verifiable by any JWT library. */
export async function signPush(input: SignPushInput): Promise<string> {
  const iat = Math.floor(input.nowMs / 1000);
  const ttl = Math.min(input.ttlSeconds ?? MAX_SIGNATURE_TTL_SECONDS, MAX_SIGNATURE_TTL_SECONDS);
  const { key } = input;
  const claims: PushClaims = {
    body: await sha256Base64url(input.body),
    iss: input.issuer,
    sub: input.taskId,
    aud: input.url,
    iat,
    exp: iat + ttl,
    jti: input.leaseId,
  };
  const signingInput = `${encodedHeader(key)}.${base64url(utf8(JSON.stringify(claims)))}`;
  const data = utf8(signingInput);
  const signature = key.signSync ? key.signSync(data) : new Uint8Array(await crypto.subtle.sign(WEBCRYPTO_PARAMS[key.alg], key.key, data));
  return `${signingInput}.${base64url(signature)}`;
}

/** Which check a push failed. */
export type SignatureCheck =
  | 'malformed'
  | 'unknown_key'
  | 'signature'
  | 'expired'
  | 'not_yet_valid'
  | 'lifetime'
  | 'audience'
  | 'issuer'
  | 'body'
  /** The same push (lease) was verified before by this receiver. */
  | 'replay'
  /** A forwarded push (`sluice listen`), which a receiver takes only with `acceptForwarded`. */
  | 'forwarded'
  /** The public keys could not be fetched: not the push's fault; try again later. */
  | 'keys_unavailable';

export class SignatureError extends Error {
  override name = 'SignatureError';
  readonly check: SignatureCheck;
  constructor(check: SignatureCheck, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.check = check;
  }
}

export interface VerifyPushInput {
  /** The `Sluice-Signature` header. */
  token: string | null | undefined;
  /** Public keys: a JWKS getter (`createLocalJWKSet`, `createRemoteJWKSet`) or one key. */
  keys: JWTVerifyGetKey | CryptoKey;
  /** The URL the push is expected to have been sent to (the `aud` claim). */
  url: string;
  body: Uint8Array<ArrayBuffer>;
  nowMs: number;
  /** Tolerated clock difference. Default 30 s. */
  clockSkewSeconds?: number;
  /** When set, `iss` must equal it. */
  issuer?: string;
}

/**
 * The issuer a compact JWS claims, read without verifying it (to choose the keys to verify it
 * with); `null` when the token is not one.
 */
export function claimedIssuer(token: string): string | null {
  const payload = token.split('.')[1];
  if (payload === undefined) return null;
  try {
    const iss = (JSON.parse(new TextDecoder().decode(fromBase64(payload))) as { iss?: unknown }).iss;
    return typeof iss === 'string' ? iss : null;
  } catch {
    return null;
  }
}

/** Verifies a push and returns its claims, or throws a `SignatureError` naming the check. */
export async function verifyPush(input: VerifyPushInput): Promise<PushClaims> {
  if (!input.token) throw new SignatureError('malformed', 'the Sluice-Signature header is missing');
  const skew = input.clockSkewSeconds ?? 30;
  let payload: PushClaims;
  try {
    const verified = await jwtVerify(input.token, input.keys as JWTVerifyGetKey, {
      algorithms: [...SIGNATURE_ALGORITHMS],
      audience: input.url,
      ...(input.issuer === undefined ? {} : { issuer: input.issuer }),
      currentDate: new Date(input.nowMs),
      clockTolerance: skew,
      requiredClaims: ['iss', 'sub', 'aud', 'iat', 'exp', 'jti'],
    });
    payload = verified.payload as unknown as PushClaims;
  } catch (error) {
    throw toSignatureError(error);
  }
  if (payload.iat > Math.floor(input.nowMs / 1000) + skew) {
    throw new SignatureError('not_yet_valid', 'the signature was issued in the future');
  }
  if (payload.exp - payload.iat > MAX_SIGNATURE_TTL_SECONDS) {
    throw new SignatureError('lifetime', `the signature is valid for more than ${MAX_SIGNATURE_TTL_SECONDS} s`);
  }
  if (typeof payload.body !== 'string' || payload.body !== (await sha256Base64url(input.body))) {
    throw new SignatureError('body', 'the body does not match the signed SHA-256');
  }
  return payload;
}

function toSignatureError(error: unknown): SignatureError {
  if (error instanceof errors.JWTExpired) return new SignatureError('expired', 'the signature has expired', { cause: error });
  if (error instanceof errors.JWTClaimValidationFailed) {
    const check: SignatureCheck =
      error.claim === 'aud'
        ? 'audience'
        : error.claim === 'iss'
          ? 'issuer'
          : error.claim === 'nbf' || error.claim === 'iat'
            ? 'not_yet_valid'
            : 'malformed';
    const why = check === 'audience' ? 'the signature was made for another URL (aud)' : `claim "${error.claim}": ${error.message}`;
    return new SignatureError(check, why, { cause: error });
  }
  if (error instanceof errors.JWKSNoMatchingKey) {
    return new SignatureError('unknown_key', 'no known key matches the signature (kid)', { cause: error });
  }
  if (
    error instanceof errors.JWKSTimeout ||
    error instanceof errors.JWKSInvalid ||
    (error instanceof TypeError && /fetch/i.test(error.message))
  ) {
    return new SignatureError('keys_unavailable', `the public keys could not be fetched: ${error.message}`, { cause: error });
  }
  if (error instanceof errors.JWSSignatureVerificationFailed) {
    return new SignatureError('signature', 'the signature does not verify', { cause: error });
  }
  const message = error instanceof Error ? error.message : String(error);
  return new SignatureError('malformed', `the signature is malformed: ${message}`, { cause: error });
}
