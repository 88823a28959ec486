/** API keys are 256 random bits, as the docs and the bad-key brake assume (src/api/auth.ts). */
import { expect, it } from 'vitest';
import { API_KEY_PREFIX, generateApiKey } from '../../src/security/api-keys.ts';

it('a new key carries 256 random bits after its prefix, and no two are alike', async () => {
  const keys = await Promise.all(Array.from({ length: 50 }, () => generateApiKey('k')));
  for (const { key } of keys) {
    expect(key.startsWith(API_KEY_PREFIX)).toBe(true);
    // 32 bytes in unpadded base64url: 43 characters of the URL-safe alphabet.
    expect(key.slice(API_KEY_PREFIX.length)).toMatch(/^[A-Za-z0-9_-]{43}$/);
  }
  expect(new Set(keys.map((k) => k.key)).size).toBe(50);
});
