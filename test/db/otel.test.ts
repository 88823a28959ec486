/**
 * The Node server's spans (src/node/otel.ts) reach a real OTLP/HTTP receiver: a local HTTP
 * server that decodes what the official exporter sends (OTLP JSON), not a mock of the SDK.
 */
import { createServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: Array<{ key: string; value: { stringValue?: string; intValue?: string | number } }>;
  status?: { code?: number };
}

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';

let t: TestDatabase;
let endpoint: TestEndpoint;
let secrets: TestSecrets;
let sluice: NodeSluice;
const spans: OtlpSpan[] = [];
const services: string[] = [];
/** Where each export went and what it said it was, asserted in the test (not in the receiver). */
const exports: Array<{ url: string | undefined; type: string | undefined }> = [];
const receiver = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    exports.push({ url: req.url, type: req.headers['content-type'] });
    const sent = JSON.parse(Buffer.concat(chunks).toString()) as {
      resourceSpans: Array<{
        resource: { attributes: Array<{ key: string; value: { stringValue?: string } }> };
        scopeSpans: Array<{ spans: OtlpSpan[] }>;
      }>;
    };
    for (const r of sent.resourceSpans) {
      services.push(r.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue ?? '');
      for (const s of r.scopeSpans) spans.push(...s.spans);
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});

beforeAll(async () => {
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const otlp = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`;
  [t, endpoint, secrets] = await Promise.all([createTestDatabase(), startEndpoint(), makeSecrets()]);
  sluice = await startNodeSluice({
    env: testEnv(secrets, t.url, { OTEL_EXPORTER_OTLP_ENDPOINT: otlp, OTEL_BSP_SCHEDULE_DELAY: '50', OTEL_SERVICE_NAME: 'sluice-test' }),
  });
});
afterAll(async () => {
  await sluice?.close();
  await endpoint?.close();
  await t?.drop();
  receiver.close();
});

const attribute = (span: OtlpSpan, key: string) => {
  const v = span.attributes.find((a) => a.key === key)?.value;
  return v?.stringValue ?? (v?.intValue === undefined ? undefined : Number(v.intValue));
};

describe('spans over OTLP/HTTP from the Node server', () => {
  it("exports each attempt's push and claim wait in the enqueuer's trace, the push under the span its traceparent names", async () => {
    endpoint.reply((push) => ({ status: push.headers['sluice-attempt'] === '1' ? 503 : 200 }));
    const res = await fetch(`${sluice.url}/v1/tasks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json', traceparent: `00-${TRACE}-${PARENT}-01` },
      body: JSON.stringify({
        url: `${endpoint.url}/traced`,
        max_attempts: 2,
        backoff: { initial_ms: 100, max_ms: 100, factor: 1, jitter: 0 },
      }),
    });
    expect(res.status).toBe(201);
    const { id } = (await res.json()) as { id: string };
    // An untraced task exports nothing.
    await fetch(`${sluice.url}/v1/tasks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: `${endpoint.url}/untraced` }),
    });
    const pushes = await endpoint.waitFor(3, 20_000);

    await expect.poll(() => spans.filter((s) => s.name === 'sluice push').length, { timeout: 10_000, interval: 50 }).toBe(2);
    const traced = pushes.filter((p) => p.path === '/traced');
    const push = spans
      .filter((s) => s.name === 'sluice push')
      .sort((a, b) => Number(attribute(a, 'sluice.attempt')) - Number(attribute(b, 'sluice.attempt')));
    for (const [i, span] of push.entries()) {
      expect(span.traceId).toBe(TRACE);
      expect(span.parentSpanId).toBe(PARENT);
      // The span the handler saw as its parent.
      expect(`00-${TRACE}-${span.spanId}-01`).toBe(traced[i]!.headers.traceparent);
      expect(attribute(span, 'sluice.task_id')).toBe(id);
      expect(attribute(span, 'http.response.status_code')).toBe(i === 0 ? 503 : 200);
      expect(BigInt(span.endTimeUnixNano)).toBeGreaterThan(BigInt(span.startTimeUnixNano));
    }
    expect(push[0]!.status?.code).toBe(2); // ERROR
    await expect.poll(() => spans.filter((s) => s.name === 'sluice claim wait').length, { timeout: 10_000, interval: 50 }).toBe(2);
    for (const wait of spans.filter((s) => s.name === 'sluice claim wait')) {
      expect([wait.traceId, wait.parentSpanId]).toEqual([TRACE, PARENT]);
    }
    expect(spans.every((s) => s.traceId === TRACE)).toBe(true);
    expect(new Set(services)).toEqual(new Set(['sluice-test']));
    expect(exports.length).toBeGreaterThan(0);
    for (const e of exports) expect(e.url).toBe('/v1/traces');
    for (const e of exports) expect(e.type).toContain('application/json');
    // The enqueue itself: a server span under the caller's.
    const [enqueue] = spans.filter((s) => s.name === 'sluice enqueue');
    expect([enqueue?.traceId, enqueue?.parentSpanId, attribute(enqueue!, 'http.response.status_code')]).toEqual([TRACE, PARENT, 201]);
  });

  it("a lease call that carries the push's traceparent (as the SDK's handler sends it) is a span under the attempt", async () => {
    endpoint.reply(() => ({ status: 202, headers: { 'sluice-ack': 'lease' } }));
    const trace = '0af7651916cd43dd8448eb211c80319c';
    const res = await fetch(`${sluice.url}/v1/tasks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: `${endpoint.url}/leased`, traceparent: `00-${trace}-${PARENT}-01` }),
    });
    expect(res.status).toBe(201);
    await expect.poll(() => endpoint.received.filter((p) => p.path === '/leased').length, { timeout: 10_000 }).toBe(1);
    const push = endpoint.received.find((p) => p.path === '/leased')!;
    const complete = await fetch(`${sluice.url}/v1/leases/${push.headers['sluice-lease-id']}/complete`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${push.headers['sluice-lease-token']}`,
        'content-type': 'application/json',
        traceparent: String(push.headers.traceparent),
      },
      body: '{}',
    });
    expect(complete.status).toBe(200);
    await expect.poll(() => spans.filter((s) => s.name === 'sluice lease complete').length, { timeout: 10_000, interval: 50 }).toBe(1);
    const call = spans.find((s) => s.name === 'sluice lease complete')!;
    const attempt = spans.find((s) => s.name === 'sluice push' && s.traceId === trace)!;
    expect([call.traceId, call.parentSpanId]).toEqual([trace, attempt.spanId]);
    expect(attribute(call, 'http.response.status_code')).toBe(200);
  });

  it('a start with an endpoint that is not an http(s) URL says so in one line', async () => {
    await expect(
      startNodeSluice({ env: testEnv(secrets, t.url, { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }), dispatch: false }),
    ).rejects.toThrow('OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" is not an http(s) URL');
  });
});
