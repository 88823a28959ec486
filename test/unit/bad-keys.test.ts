import { describe, expect, it } from 'vitest';
import { clientGroup } from '../../src/api/auth.ts';
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

describe('clientGroup', () => {
  it('counts IPv4 clients one by one and IPv6 clients by their /64', () => {
    expect(clientGroup('203.0.113.7')).toBe('203.0.113.7');
    expect(clientGroup('::ffff:203.0.113.7')).toBe('::ffff:203.0.113.7');
    expect(clientGroup('2001:db8:0:1:aaaa::1')).toBe('2001:db8:0:1::/64');
    expect(clientGroup('2001:0db8:0000:0001:ffff:ffff:ffff:ffff')).toBe('2001:db8:0:1::/64');
    expect(clientGroup('2001:db8::7')).toBe('2001:db8:0:0::/64');
    expect(clientGroup(null)).toBeNull();
  });
});
