/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): a task enqueued inside a trace
 * carries its `traceparent` (and `tracestate`) among its headers, and every push of it is a
 * child of that parent: the same trace id and flags, and a span id of its own per attempt.
 */

export const TRACEPARENT = 'traceparent';
export const TRACESTATE = 'tracestate';

export interface TraceParent {
  traceId: string;
  parentId: string;
  flags: string;
}

// Version 00's fields; a later version may append fields after a dash, which version 00
// readers ignore (the spec's forward compatibility), and version ff is never valid.
const TRACEPARENT_PATTERN = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZEROS = /^0+$/;

/** The parts of a valid `traceparent`, or null (a malformed one starts no trace). */
export function parseTraceparent(value: string): TraceParent | null {
  const m = TRACEPARENT_PATTERN.exec(value.trim());
  if (!m) return null;
  const [, version, traceId, parentId, flags, rest] = m as unknown as [string, string, string, string, string, string | undefined];
  if (version === 'ff' || (version === '00' && rest !== undefined)) return null;
  if (ZEROS.test(traceId) || ZEROS.test(parentId)) return null;
  return { traceId, parentId, flags };
}

// A list of up to 32 `key=value` members, 512 characters in all (the spec's limits).
const TRACESTATE_KEY = /^(?:[a-z][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13})$/;
const TRACESTATE_VALUE = /^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;

/** Why a `tracestate` is not one, or null when it is. */
export function tracestateProblem(value: string): string | null {
  if (value.length > 512) return 'is at most 512 characters';
  const members = value
    .split(',')
    .map((m) => m.trim())
    .filter((m) => m !== '');
  if (members.length > 32) return 'has at most 32 list members';
  for (const member of members) {
    const eq = member.indexOf('=');
    if (eq < 0 || !TRACESTATE_KEY.test(member.slice(0, eq)) || !TRACESTATE_VALUE.test(member.slice(eq + 1)))
      return `has a member that is not key=value as W3C Trace Context defines it: "${member.slice(0, 40)}"`;
  }
  return null;
}

/** The `traceparent` a push sends: a child of the task's parent, with the attempt's span id. */
export function childTraceparent(parent: TraceParent, spanId: string): string {
  return `00-${parent.traceId}-${spanId}-${parent.flags}`;
}

/**
 * An attempt's span id: the first 16 hex digits of its lease id (a random UUID), so that what
 * the push carries, the lease calls and the attempt's record all name one span. Never zero: a
 * version-4 UUID's 13th digit is 4.
 */
export function attemptSpanId(leaseId: string): string {
  return leaseId.replaceAll('-', '').slice(0, 16).toLowerCase();
}
