/** Byte helpers on web-standard APIs and portable JavaScript only (no Buffer). */
import { sha256 } from '@noble/hashes/sha2.js';

const encoder = new TextEncoder();

export function utf8(text: string): Uint8Array<ArrayBuffer> {
  return encoder.encode(text);
}

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** RFC 4648 §5, unpadded (JWS's form). Several per push: written out, not through btoa and regexes. */
export function base64url(bytes: Uint8Array): string {
  return encode(bytes, BASE64URL, false);
}

/** RFC 4648 §4, padded. */
export function base64(bytes: Uint8Array): string {
  return encode(bytes, BASE64, true);
}

function encode(bytes: Uint8Array, alphabet: string, pad: boolean): string {
  const parts: string[] = [];
  let chunk = '';
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    chunk += alphabet[n >> 18]! + alphabet[(n >> 12) & 63]! + alphabet[(n >> 6) & 63]! + alphabet[n & 63]!;
    // Long inputs are joined once at the end rather than copied over and over.
    if (chunk.length >= 8_192) {
      parts.push(chunk);
      chunk = '';
    }
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const n = bytes[i]! << 16;
    chunk += alphabet[n >> 18]! + alphabet[(n >> 12) & 63]! + (pad ? '==' : '');
  } else if (rest === 2) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8);
    chunk += alphabet[n >> 18]! + alphabet[(n >> 12) & 63]! + alphabet[(n >> 6) & 63]! + (pad ? '=' : '');
  }
  parts.push(chunk);
  return parts.join('');
}

export function fromBase64(text: string): Uint8Array<ArrayBuffer> {
  const normal = text.replace(/-/g, '+').replace(/_/g, '/');
  const binary = atob(normal + '='.repeat((4 - (normal.length % 4)) % 4));
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

/**
 * Bodies up to this size are hashed in JavaScript, at once: a WebCrypto call costs more in its
 * hand-off to a thread and back (about 45 µs of CPU, measured) than hashing a small body here
 * (about 5 µs); larger bodies are hashed faster natively.
 */
const HASH_IN_JS_BYTES = 4_096;

/** base64url of the SHA-256 of `bytes`: the `body` claim of a push signature. */
export async function sha256Base64url(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  if (bytes.length <= HASH_IN_JS_BYTES) return base64url(sha256(bytes));
  return base64url(new Uint8Array(await crypto.subtle.digest('SHA-256', bytes)));
}

/** Compares two byte strings in time that depends only on their lengths. */
export function timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ (b[i % b.length] ?? 0);
  return diff === 0;
}
