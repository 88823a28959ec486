/**
 * Verifying a push: the `Sluice-Signature` JWS against Sluice's JWKS (fetched and cached by
 * `kid`, so current and next keys both work) or given keys; the SHA-256 of the exact body
 * bytes; `aud` against the URL the push was sent to; `exp` within a bounded clock skew; and,
 * within one receiver, no replay of a push already seen. A push forwarded by a pull consumer
 * (`sluice listen --forward-to`, issuer `sluice-forward`) is signed with keys of its own and is
 * refused unless the receiver is made with `acceptForwarded` (in development).
 */
import { createLocalJWKSet, createRemoteJWKSet, customFetch, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import { HEADERS } from '../protocol/headers.ts';
import { claimedIssuer, FORWARD_ISSUER, FORWARD_JWKS_PATH, SignatureError, verifyPush } from '../protocol/signature.ts';

export interface ReceiverOptions {
  /** Sluice's base URL; the JWKS is fetched from `<sluiceUrl>/.well-known/jwks.json`. */
  sluiceUrl?: string;
  /** The JWKS URL, when it is not under `sluiceUrl`. */
  jwksUrl?: string;
  /** Public keys to trust instead of fetching them (a JWKS object). */
  keys?: JSONWebKeySet;
  /**
   * The URL Sluice pushed to, checked against the signature's `aud`. Default: the request's
   * own URL. Behind a proxy that rewrites URLs, give the public URL (or compute it).
   */
  url?: string | ((request: Request) => string);
  /** When set, the signature's `iss` must equal it. Default: not checked. */
  issuer?: string;
  /**
   * Also accept pushes forwarded by `sluice listen --forward-to` (issuer `sluice-forward`), verified
   * with the forwarding keys (`<sluiceUrl>/.well-known/forward-jwks.json`, or `forwardKeys`).
   * For development only: anyone holding a pull key obtains such pushes. Default false, which
   * refuses them with the check `forwarded`.
   */
  acceptForwarded?: boolean;
  /** The forwarding keys to trust instead of fetching them (a JWKS object), with `acceptForwarded`. */
  forwardKeys?: JSONWebKeySet;
  /** Tolerated clock difference, seconds. Default 30, at most 300. */
  clockSkewSeconds?: number;
  /** Refuse a push this receiver has already verified (same lease). Default true. */
  rejectReplays?: boolean;
  /** The clock, for tests. Default `Date.now`. */
  now?: () => number;
  /** A `fetch` for the JWKS. Default the global one. */
  fetch?: typeof fetch;
}

/** A verified push: the task and its lease. */
export interface Push {
  taskId: string;
  queue: string;
  concurrencyKey: string | null;
  attempt: number;
  maxAttempts: number;
  /** 0 on a first push; after waits for children (`ctx.waitFor`), how many it has resumed from. */
  resume: number;
  lease: { id: string; expiresAt: Date; token: string };
  headers: Headers;
  /** The exact body bytes. */
  body: Uint8Array<ArrayBuffer>;
  text(): string;
  json<T = unknown>(): T;
}

export interface Receiver {
  /** Verifies a push; throws a `SignatureError` whose `check` names what failed. */
  verify(request: Request): Promise<Push>;
}

export function createReceiver(options: ReceiverOptions): Receiver {
  // Made at the first push, not here: frameworks load a route's module where its configuration
  // may be absent (Next.js does at build time), and that must not fail.
  let keys: JWTVerifyGetKey | null = null;
  let forwardKeys: JWTVerifyGetKey | null = null;
  const now = options.now ?? Date.now;
  const skew = Math.min(options.clockSkewSeconds ?? 30, 300);
  const seen = new Map<string, number>();
  return {
    async verify(request) {
      // Refuse before reading a body that cannot be a push.
      if (!request.headers.get(HEADERS.signature)) throw new SignatureError('malformed', 'the Sluice-Signature header is missing');
      const declared = Number(request.headers.get('content-length') ?? 0);
      if (declared > MAX_PUSH_BYTES) throw new SignatureError('malformed', `the body is larger than ${MAX_PUSH_BYTES} bytes`);
      const body = new Uint8Array(await request.arrayBuffer());
      const url = typeof options.url === 'function' ? options.url(request) : (options.url ?? request.url);
      const token = request.headers.get(HEADERS.signature) as string;
      // A forwarded push is verified with the forwarding keys only, and a production push with
      // Sluice's keys only: neither kind of key can stand for the other.
      const forwarded = claimedIssuer(token) === FORWARD_ISSUER;
      if (forwarded && !options.acceptForwarded) {
        throw new SignatureError(
          'forwarded',
          'this push was forwarded by a pull consumer (sluice listen), not sent by Sluice: accepted only by a receiver made with acceptForwarded, in development',
        );
      }
      let issuer = options.issuer;
      if (forwarded) {
        forwardKeys ??= keySource(options, 'forward');
        issuer = FORWARD_ISSUER;
      } else keys ??= keySource(options, 'push');
      const claims = await verifyPush({
        token,
        keys: (forwarded ? forwardKeys : keys) as JWTVerifyGetKey,
        url,
        body,
        nowMs: now(),
        clockSkewSeconds: skew,
        ...(issuer === undefined ? {} : { issuer }),
      });
      if (options.rejectReplays ?? true) {
        const t = now();
        for (const [jti, exp] of seen) if (exp < t) seen.delete(jti);
        if (seen.has(claims.jti)) throw new SignatureError('replay', 'this push was already received (same lease)');
        seen.set(claims.jti, (claims.exp + skew) * 1000);
      }
      const h = request.headers;
      const key = h.get(HEADERS.concurrencyKey);
      return {
        taskId: claims.sub,
        queue: h.get(HEADERS.queue) ?? '',
        concurrencyKey: key === null ? null : decodeKey(key),
        attempt: Number(h.get(HEADERS.attempt) ?? 0),
        maxAttempts: Number(h.get(HEADERS.maxAttempts) ?? 0),
        resume: Number(h.get(HEADERS.resume) ?? 0),
        lease: { id: claims.jti, expiresAt: new Date(h.get(HEADERS.leaseExpiresAt) ?? 0), token: h.get(HEADERS.leaseToken) ?? '' },
        headers: h,
        body,
        text: () => new TextDecoder().decode(body),
        json: <T>() => JSON.parse(new TextDecoder().decode(body)) as T,
      };
    },
  };
}

/** Sluice stores at most 512 KiB of body per task. */
const MAX_PUSH_BYTES = 1024 * 1024;

function decodeKey(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** Where a receiver finds the keys of production pushes, or of forwarded ones. */
function keySource(options: ReceiverOptions, kind: 'push' | 'forward'): JWTVerifyGetKey {
  const given = kind === 'push' ? options.keys : options.forwardKeys;
  if (given) return createLocalJWKSet(given);
  const base = options.sluiceUrl?.replace(/\/+$/, '');
  const url =
    kind === 'push'
      ? (options.jwksUrl ?? (base ? `${base}/.well-known/jwks.json` : null))
      : base
        ? `${base}${FORWARD_JWKS_PATH}`
        : options.jwksUrl
          ? new URL(FORWARD_JWKS_PATH, options.jwksUrl).href
          : null;
  if (!url)
    throw new Error(
      kind === 'push' ? 'createReceiver needs sluiceUrl, jwksUrl or keys' : 'acceptForwarded needs sluiceUrl, jwksUrl or forwardKeys',
    );
  const fetchImpl = options.fetch;
  return createRemoteJWKSet(new URL(url), fetchImpl ? { [customFetch]: (input, init) => fetchImpl(input, init) } : {});
}
