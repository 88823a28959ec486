import { describe, expect, it } from 'vitest';
import { prefersMinimal } from '../../src/api/body.ts';

describe('prefersMinimal (RFC 7240 Prefer)', () => {
  it.each([
    ['return=minimal', true],
    ['Return = "Minimal"', true],
    ['respond-async, return=minimal; foo=bar', true],
    ['wait=5,return=minimal', true],
    ['return=representation', false],
    ['return', false],
    ['minimal', false],
    ['respond-async', false],
    ['', false],
    [undefined, false],
  ])('%j → %s', (header, minimal) => {
    expect(prefersMinimal(header)).toBe(minimal);
  });
});
