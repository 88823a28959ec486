/**
 * Spans over OTLP/HTTP from the Node server (docs/guide.md#tracing), with the official
 * OpenTelemetry JS SDK, when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `…_TRACES_ENDPOINT`) is set. Node
 * only: the Worker carries the trace headers (src/core/trace.ts) and exports nothing.
 *
 * For each push of a task enqueued in a trace, two spans in it, children of the enqueuer's:
 * `sluice claim wait` (from the task's due time to its lease) and `sluice push` (the attempt),
 * whose span id is the one the push's `traceparent` names, so the handler's spans hang under it.
 * And a server span for each enqueue and lease call that carried a `traceparent` (the SDK's
 * handler sends the push's, so its lease calls hang under the attempt).
 * Sampling follows the enqueuer's flags (a trace it did not sample exports nothing).
 */
import { type Context, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, type IdGenerator, RandomIdGenerator, TracerProvider } from '@opentelemetry/sdk-trace';
import type { RequestSpans } from '../api/context.ts';
import type { PushResult } from '../core/outcome.ts';
import { attemptSpanId, parseTraceparent, TRACEPARENT } from '../core/trace.ts';
import type { LeasedTask } from '../core/types.ts';
import { SLUICE_VERSION as VERSION } from '../version.ts';

export interface PushSpans extends RequestSpans {
  /** A push ended (`startedAtMs` when it began): its spans, if its task is in a trace. */
  pushed(task: LeasedTask, result: PushResult, startedAtMs: number): void;
  /** Sends what is still buffered. */
  shutdown(): Promise<void>;
}

/** Ids as the SDK makes them, except a span id chosen for the next span (the attempt's). */
class ChosenSpanIds implements IdGenerator {
  next: string | null = null;
  readonly #random = new RandomIdGenerator();
  generateTraceId(): string {
    return this.#random.generateTraceId();
  }
  generateSpanId(): string {
    const id = this.next ?? this.#random.generateSpanId();
    this.next = null;
    return id;
  }
}

/**
 * The exporter the environment asks for, or null when it asks for none. A traces endpoint is
 * used as it is; a base endpoint gets `/v1/traces` (the OTLP/HTTP convention). Throws one line
 * naming the variable when it is not an http(s) URL.
 */
export function startPushSpans(env: Record<string, string | undefined>): PushSpans | null {
  const own = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!own && !base) return null;
  const name = own ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT';
  const url = own || `${base!.replace(/\/+$/, '')}/v1/traces`;
  if (!/^https?:\/\//.test(url) || !URL.canParse(url)) throw new Error(`${name}: "${own || base}" is not an http(s) URL`);
  const delay = Number(env.OTEL_BSP_SCHEDULE_DELAY ?? 5_000);
  if (!Number.isFinite(delay) || delay < 0)
    throw new Error(`OTEL_BSP_SCHEDULE_DELAY: "${env.OTEL_BSP_SCHEDULE_DELAY}" is not a number of ms`);

  const ids = new ChosenSpanIds();
  const provider = new TracerProvider({
    idGenerator: ids,
    resource: resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME || 'sluice', 'service.version': VERSION }),
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url }), scheduledDelayMillis: delay })],
  });
  const tracer = provider.getTracer('sluice', VERSION);

  return {
    pushed(task, result, startedAtMs) {
      const traceparent = task.headers[TRACEPARENT];
      const context = traceparent === undefined ? null : remoteParent(traceparent);
      if (!context) return;
      const attributes = { 'sluice.task_id': task.id, 'sluice.queue': task.queue, 'sluice.attempt': task.attempts };
      tracer
        .startSpan('sluice claim wait', { kind: SpanKind.INTERNAL, startTime: task.runAt, attributes }, context)
        .end(task.lease.leasedAt);

      ids.next = attemptSpanId(task.lease.id);
      const span = tracer.startSpan(
        'sluice push',
        {
          kind: SpanKind.CLIENT,
          startTime: startedAtMs,
          attributes: { ...attributes, 'http.request.method': task.method, 'url.full': task.url, 'sluice.lease_id': task.lease.id },
        },
        context,
      );
      ids.next = null;
      if (result.kind === 'response') {
        span.setAttribute('http.response.status_code', result.status);
        if (result.status >= 400) span.setStatus({ code: SpanStatusCode.ERROR, message: `HTTP ${result.status}` });
      } else {
        span.setStatus({ code: SpanStatusCode.ERROR, message: result.kind === 'timeout' ? 'timeout' : result.message });
      }
      span.end(startedAtMs + result.durationMs);
    },
    request(r) {
      const context = remoteParent(r.traceparent);
      if (!context) return;
      const span = tracer.startSpan(
        r.name,
        {
          kind: SpanKind.SERVER,
          startTime: r.startedAtMs,
          attributes: { 'http.request.method': r.method, 'url.path': r.path, 'http.response.status_code': r.status },
        },
        context,
      );
      // A server span is in error for a 5xx only: a 4xx is the caller's (OpenTelemetry's HTTP conventions).
      if (r.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR, message: `HTTP ${r.status}` });
      span.end(r.endedAtMs);
    },
    shutdown: () => provider.shutdown(),
  };
}

/** The context a span made under a remote `traceparent` starts from, or null when it is not one. */
function remoteParent(traceparent: string): Context | null {
  const parent = parseTraceparent(traceparent);
  if (!parent) return null;
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: parent.traceId,
    spanId: parent.parentId,
    traceFlags: Number.parseInt(parent.flags, 16) & 1,
    isRemote: true,
  });
}
