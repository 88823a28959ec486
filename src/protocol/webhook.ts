/**
 * Standard Webhooks v1 signatures (HMAC-SHA256 over `id.timestamp.body`), sent beside the JWS
 * when `SLUICE_WEBHOOK_SECRET` is set, so stock Standard Webhooks verifiers work too.
 */
import { base64, fromBase64, timingSafeEqual, utf8 } from './encoding.ts';

const PREFIX = 'whsec_';

/** Reads a `whsec_…` secret into its key bytes; throws on a malformed or short secret. */
export function webhookSecretBytes(secret: string): Uint8Array<ArrayBuffer> {
  if (!secret.startsWith(PREFIX)) throw new Error(`a webhook secret starts with "${PREFIX}"`);
  const bytes = fromBase64(secret.slice(PREFIX.length));
  if (bytes.length < 24 || bytes.length > 64) throw new Error('a webhook secret holds 24 to 64 bytes (base64)');
  return bytes;
}

async function hmac(secret: Uint8Array<ArrayBuffer>, content: string): Promise<Uint8Array> {
  const key = await crypto.subtle.importKey('raw', secret, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return new Uint8Array(await crypto.subtle.sign('HMAC', key, utf8(content)));
}

/** The `webhook-signature` header value: `v1,<base64 HMAC>`. */
export async function signWebhook(secret: Uint8Array<ArrayBuffer>, id: string, timestampSeconds: number, body: string): Promise<string> {
  return `v1,${base64(await hmac(secret, `${id}.${timestampSeconds}.${body}`))}`;
}

/** True when any `v1` signature in the space-separated header matches. */
export async function verifyWebhook(
  secret: Uint8Array<ArrayBuffer>,
  headers: { id: string; timestamp: string; signature: string },
  body: string,
  nowMs: number,
  toleranceSeconds = 300,
): Promise<boolean> {
  const ts = Number(headers.timestamp);
  if (!Number.isInteger(ts) || Math.abs(nowMs / 1000 - ts) > toleranceSeconds) return false;
  const expected = await hmac(secret, `${headers.id}.${ts}.${body}`);
  let ok = false;
  for (const entry of headers.signature.split(' ')) {
    const [version, value] = entry.split(',', 2);
    if (version === 'v1' && value && timingSafeEqual(fromBase64(value), expected)) ok = true;
  }
  return ok;
}
