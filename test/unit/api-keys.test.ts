/** API keys are 256 random bits, as the docs and the bad-key brake assume (src/api/auth.ts); a key's queues match as documented. */
import { expect, it } from 'vitest';
import { API_KEY_PREFIX, generateApiKey, queueAllowed } from '../../src/security/api-keys.ts';

it('a new key carries 256 random bits after its prefix, and no two are alike', async () => {
  const keys = await Promise.all(Array.from({ length: 50 }, () => generateApiKey('k')));
  for (const { key } of keys) {
    expect(key.startsWith(API_KEY_PREFIX)).toBe(true);
    // 32 bytes in unpadded base64url: 43 characters of the URL-safe alphabet.
    expect(key.slice(API_KEY_PREFIX.length)).toMatch(/^[A-Za-z0-9_-]{43}$/);
  }
  expect(new Set(keys.map((k) => k.key)).size).toBe(50);
});

it('a key limited to queues admits a name exactly, and a pattern ending in * as a prefix; anything else literally', () => {
  const scope = ['billing', 'reports-*', 'ops_*', 'a.b'];
  const admitted = ['billing', 'reports-', 'reports-eu', 'reports-eu-2', 'ops_', 'ops_1', 'a.b'];
  const refused = ['billing2', 'billin', 'Billing', 'reports', 'reports_eu', 'opsX1', 'ops', 'axb', 'default'];
  for (const queue of admitted) expect(queueAllowed(scope, queue), queue).toBe(true);
  for (const queue of refused) expect(queueAllowed(scope, queue), queue).toBe(false);
  // No `queues`: every queue.
  expect(queueAllowed(null, 'anything')).toBe(true);
});
