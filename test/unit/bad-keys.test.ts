import { describe, expect, it } from 'vitest';
import { BadKeyBrake } from '../../src/security/bad-keys.ts';

describe('BadKeyBrake', () => {
  it('refuses an address after max bad keys until its window ends; other addresses are untouched', () => {
    let now = 0;
    const brake = new BadKeyBrake({ max: 3, windowMs: 60_000, now: () => now });
    for (let i = 0; i < 2; i++) brake.failed('a');
    expect(brake.blockedFor('a')).toBe(0);
    brake.failed('a');
    now = 10_000;
    expect(brake.blockedFor('a')).toBe(50_000);
    expect(brake.blockedFor('b')).toBe(0);
    now = 60_000;
    expect(brake.blockedFor('a')).toBe(0);
    brake.failed('a');
    expect(brake.blockedFor('a')).toBe(0);
  });
});
