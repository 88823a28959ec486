/** W3C Trace Context (src/core/trace.ts): what is a traceparent and a tracestate, and a push's child. */
import { describe, expect, it } from 'vitest';
import { attemptSpanId, childTraceparent, parseTraceparent, tracestateProblem } from '../../src/core/trace.ts';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';

describe('parseTraceparent', () => {
  it('reads version 00, and a later version with fields of its own', () => {
    expect(parseTraceparent(`00-${TRACE}-00f067aa0ba902b7-01`)).toEqual({ traceId: TRACE, parentId: '00f067aa0ba902b7', flags: '01' });
    expect(parseTraceparent(`cc-${TRACE}-00f067aa0ba902b7-09-what-comes-later`)).toMatchObject({ flags: '09' });
  });

  it('refuses what the spec refuses', () => {
    for (const bad of [
      `00-${TRACE}-00f067aa0ba902b7-01-extra`, // version 00 has exactly four fields
      `ff-${TRACE}-00f067aa0ba902b7-01`, // version ff is invalid
      `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`, // all-zero trace id
      `00-${TRACE}-${'0'.repeat(16)}-01`, // all-zero parent id
      `00-${TRACE.toUpperCase()}-00f067aa0ba902b7-01`, // lower-case hex only
      `00-${TRACE}-00f067aa0ba902b7`,
      '',
    ]) {
      expect(parseTraceparent(bad), bad).toBeNull();
    }
  });
});

describe('tracestateProblem', () => {
  it('takes list members of key=value, tenant keys included', () => {
    expect(tracestateProblem('congo=t61rcWkgMzE,rojo=00f067aa0ba902b7')).toBeNull();
    expect(tracestateProblem('tenant@vendor=opaque value , other=1')).toBeNull();
  });

  it('names what is wrong', () => {
    expect(tracestateProblem('Upper=1')).toMatch(/key=value/);
    expect(tracestateProblem('novalue')).toMatch(/key=value/);
    expect(tracestateProblem('k=a,b')).toMatch(/key=value/);
    expect(tracestateProblem(Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(','))).toMatch(/32 list members/);
    expect(tracestateProblem(`k=${'v'.repeat(520)}`)).toMatch(/512/);
  });
});

describe("a push's traceparent", () => {
  it("keeps the trace id and flags, with the attempt's span id from its lease id", () => {
    const parent = parseTraceparent(`00-${TRACE}-00f067aa0ba902b7-01`)!;
    const span = attemptSpanId('9B2A4C1E-7F3D-4E21-9A8B-0C1D2E3F4A5B');
    expect(span).toBe('9b2a4c1e7f3d4e21');
    expect(childTraceparent(parent, span)).toBe(`00-${TRACE}-9b2a4c1e7f3d4e21-01`);
  });
});
