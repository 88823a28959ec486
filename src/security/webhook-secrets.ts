/**
 * Standard Webhooks secrets, one per endpoint (docs/DESIGN.md §8). `SLUICE_WEBHOOK_SECRET` is a
 * master secret that never leaves Sluice; each endpoint (origin and path, without the query)
 * gets its own secret derived from it, so a receiver that can verify its own pushes cannot forge
 * pushes to any other endpoint. (The JWS signature, bound to the URL, is the default anyway.)
 */
import { base64 } from '../protocol/encoding.ts';

/** The endpoint a URL belongs to: origin and path; the query may differ from task to task. */
export function webhookEndpoint(url: string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname}`;
}

const cache = new Map<string, Promise<Uint8Array<ArrayBuffer>>>();

/** The key bytes of an endpoint's secret: HMAC-SHA256(master, label + endpoint). Cached. */
export function endpointWebhookKey(master: Uint8Array<ArrayBuffer>, url: string): Promise<Uint8Array<ArrayBuffer>> {
  return derivedKey(master, 'sluice webhook secret v1', url);
}

/**
 * The key bytes of the secret that signs pushes forwarded to `url` by a pull consumer
 * (security/forwarding.ts): derived under a label of its own, so it is no endpoint's secret, and
 * a receiver that checks its endpoint's secret refuses a forwarded push.
 */
export function forwardWebhookKey(master: Uint8Array<ArrayBuffer>, url: string): Promise<Uint8Array<ArrayBuffer>> {
  return derivedKey(master, 'sluice forward secret v1', url);
}

function derivedKey(master: Uint8Array<ArrayBuffer>, label: string, url: string): Promise<Uint8Array<ArrayBuffer>> {
  const endpoint = webhookEndpoint(url);
  const cacheKey = `${base64(master)} ${label} ${endpoint}`;
  let key = cache.get(cacheKey);
  if (!key) {
    key = (async () => {
      const hmac = await crypto.subtle.importKey('raw', master, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
      return new Uint8Array(await crypto.subtle.sign('HMAC', hmac, new TextEncoder().encode(`${label}\n${endpoint}`)));
    })();
    // Bounded: a flood of endpoints forgets the oldest first.
    if (cache.size >= 10_000) cache.delete(cache.keys().next().value as string);
    cache.set(cacheKey, key);
  }
  return key;
}

/** The `whsec_…` secret to configure at the endpoint that `url` belongs to. */
export async function endpointWebhookSecret(master: Uint8Array<ArrayBuffer>, url: string): Promise<string> {
  return `whsec_${base64(await endpointWebhookKey(master, url))}`;
}

/** The `whsec_…` secret that verifies pushes forwarded to `url` (a development handler's). */
export async function forwardWebhookSecret(master: Uint8Array<ArrayBuffer>, url: string): Promise<string> {
  return `whsec_${base64(await forwardWebhookKey(master, url))}`;
}
