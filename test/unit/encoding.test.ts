import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { base64, base64url, fromBase64, sha256Base64url } from '../../src/protocol/encoding.ts';

const webCryptoHash = async (bytes: Uint8Array<ArrayBuffer>) => base64url(new Uint8Array(await crypto.subtle.digest('SHA-256', bytes)));

describe('sha256Base64url', () => {
  it('equals WebCrypto on both sides of the size where it stops hashing in JavaScript', async () => {
    for (const size of [0, 1, 55, 56, 64, 4_095, 4_096, 4_097, 70_000]) {
      const bytes = new Uint8Array(size).map((_, i) => (i * 31 + size) & 0xff);
      expect(await sha256Base64url(bytes)).toBe(await webCryptoHash(bytes));
    }
  });

  it('equals WebCrypto for any body', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 5_000 }), async (array) => {
        const bytes = new Uint8Array(array);
        expect(await sha256Base64url(bytes)).toBe(await webCryptoHash(bytes));
      }),
      { numRuns: 200 },
    );
  });
});

describe('base64 and base64url', () => {
  it('match the platform encoder for any bytes, and fromBase64 reads both back', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 20_000 }), (array) => {
        const bytes = new Uint8Array(array);
        let binary = '';
        for (const b of bytes) binary += String.fromCharCode(b);
        const padded = btoa(binary);
        expect(base64(bytes)).toBe(padded);
        expect(base64url(bytes)).toBe(padded.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, ''));
        expect(fromBase64(base64url(bytes))).toEqual(bytes);
        expect(fromBase64(base64(bytes))).toEqual(bytes);
      }),
      { numRuns: 300 },
    );
  });
});
