/**
 * API keys: `Authorization: Bearer <key>`. Sluice stores only SHA-256 hashes (in
 * `SLUICE_API_KEYS`), compares them in constant time, and grants each key its scopes.
 */
import { base64url, timingSafeEqual, utf8 } from '../protocol/encoding.ts';

export const SCOPES = ['tasks:write', 'tasks:read', 'tasks:pull', 'metrics:read', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

export interface ApiKeyEntry {
  name: string;
  /** Lower-case hex SHA-256 of the key. */
  sha256: string;
  scopes: readonly Scope[];
  /**
   * Origins (scheme, host, port) a pull with this key may forward to (`push_to`) besides this
   * machine's loopback addresses (security/forwarding.ts). Default none.
   */
  forwardTo?: readonly string[];
  /**
   * The queues this key may use (`"queues"` in SLUICE_API_KEYS): names, or prefixes ending in
   * `*` (`reports-*`). Default every queue (docs/DESIGN.md §8).
   */
  queues?: readonly string[];
}

/** The queues a key may use: its `queues` patterns, or `null` for every queue. */
export type QueueScope = readonly string[] | null;

/** Whether `queue` is one a key of this scope may use: a pattern names it, or is a prefix of it ending in `*`. */
export function queueAllowed(scope: QueueScope, queue: string): boolean {
  return scope === null || scope.some((p) => (p.endsWith('*') ? queue.startsWith(p.slice(0, -1)) : queue === p));
}

export const API_KEY_PREFIX = 'sk_sluice_';

export async function sha256Hex(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', utf8(text)));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * Finds the entry whose hash matches `presented`. Every entry is compared, so the time taken
 * does not say which entry (or how much of a hash) matched.
 */
export async function matchApiKey(entries: readonly ApiKeyEntry[], presented: string): Promise<ApiKeyEntry | null> {
  const hash = utf8(await sha256Hex(presented));
  let found: ApiKeyEntry | null = null;
  for (const entry of entries) {
    if (timingSafeEqual(utf8(entry.sha256), hash)) found = entry;
  }
  return found;
}

/** A new random key and the entry that admits it. */
export async function generateApiKey(name: string, scopes: readonly Scope[] = SCOPES): Promise<{ key: string; entry: ApiKeyEntry }> {
  const key = API_KEY_PREFIX + base64url(crypto.getRandomValues(new Uint8Array(32)));
  return { key, entry: { name, sha256: await sha256Hex(key), scopes } };
}
