/**
 * Verifying a push: the `Sluice-Signature` JWS against Sluice's JWKS (fetched and cached by
 * `kid`, so current and next keys both work) or given keys; the SHA-256 of the exact body
 * bytes; `aud` against the URL the push was sent to; `exp` within a bounded clock skew; and,
 * within one receiver, no replay of a push already seen.
 */
import { createLocalJWKSet, createRemoteJWKSet, customFetch, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import { HEADERS } from './protocol/headers.ts';
import { SignatureError, verifyPush } from './protocol/signature.ts';

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
      keys ??= keySource(options);
      const claims = await verifyPush({
        token: request.headers.get(HEADERS.signature),
        keys,
        url,
        body,
        nowMs: now(),
        clockSkewSeconds: skew,
        ...(options.issuer === undefined ? {} : { issuer: options.issuer }),
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

function keySource(options: ReceiverOptions): JWTVerifyGetKey {
  if (options.keys) return createLocalJWKSet(options.keys);
  const url = options.jwksUrl ?? (options.sluiceUrl ? `${options.sluiceUrl.replace(/\/+$/, '')}/.well-known/jwks.json` : null);
  if (!url) throw new Error('createReceiver needs sluiceUrl, jwksUrl or keys');
  const fetchImpl = options.fetch;
  return createRemoteJWKSet(new URL(url), fetchImpl ? { [customFetch]: (input, init) => fetchImpl(input, init) } : {});
}
