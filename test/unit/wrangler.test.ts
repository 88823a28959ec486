/**
 * The Worker that tests and `npm start` run in workerd (src/node/worker-runtime.ts) has the
 * compatibility date and flags that a deployment gets from wrangler.toml: a flag set in one
 * and not the other would make local runs prove nothing of production.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { COMPATIBILITY_DATE, COMPATIBILITY_FLAGS } from '../../src/node/worker-runtime.ts';

const toml = readFileSync(new URL('../../wrangler.toml', import.meta.url), 'utf8');

describe('wrangler.toml and the local Worker', () => {
  it('have the same compatibility date and flags', () => {
    expect(toml.match(/^compatibility_date\s*=\s*"([^"]+)"/m)?.[1]).toBe(COMPATIBILITY_DATE);
    const flags = toml.match(/^compatibility_flags\s*=\s*\[([^\]]*)\]/m)?.[1] ?? '';
    expect([...flags.matchAll(/"([^"]+)"/g)].map((m) => m[1]).sort()).toEqual([...COMPATIBILITY_FLAGS].sort());
  });
});
