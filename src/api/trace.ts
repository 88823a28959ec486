/** An enqueue request's trace context (W3C Trace Context), read once for all its tasks. */
import { parseTraceparent, TRACEPARENT, tracestateProblem } from '../core/trace.ts';

/** An enqueue request's trace context, read once for all its tasks (`requestTrace`). */
export interface RequestTrace {
  traceparent: string;
  tracestate?: string;
}

/**
 * An enqueue request's trace context from its `traceparent` and `tracestate` headers, or `null`.
 * A malformed one is ignored, as W3C Trace Context asks of a receiver: its tasks then start no
 * trace, and the enqueue does not fail for a tracer's fault.
 */
export function requestTrace(traceparent: string | undefined, tracestate: string | undefined): RequestTrace | null {
  if (traceparent === undefined || parseTraceparent(traceparent) === null) return null;
  return {
    traceparent: traceparent.trim(),
    ...(tracestate !== undefined && tracestateProblem(tracestate) === null ? { tracestate: tracestate.trim() } : {}),
  };
}

/** The request's trace context, given to a task that names none of its own. */
export function inheritTrace(item: unknown, trace: RequestTrace | null): unknown {
  if (trace === null || item === null || typeof item !== 'object' || Array.isArray(item)) return item;
  const own = item as { traceparent?: unknown; tracestate?: unknown; headers?: unknown };
  const headers = own.headers !== null && typeof own.headers === 'object' ? Object.keys(own.headers) : [];
  if (own.traceparent !== undefined || headers.some((h) => h.toLowerCase() === TRACEPARENT)) return item;
  const state = own.tracestate === undefined && trace.tracestate !== undefined ? { tracestate: trace.tracestate } : {};
  return { ...item, traceparent: trace.traceparent, ...state };
}
