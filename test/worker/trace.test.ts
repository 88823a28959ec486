/**
 * Trace propagation (src/core/trace.ts), through the real Worker in workerd and the Node server:
 * a task enqueued in a W3C trace (a field, or the enqueue request's own header) is pushed on
 * every attempt with the same trace id and flags and a span id of its own, its tracestate as given.
 */
import { describe, expect, it } from 'vitest';
import type { ReceivedPush } from '../helpers/endpoint.ts';
import { useNodeBeside, useWorkerFixture } from '../helpers/worker-fixture.ts';

const f = useWorkerFixture();

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';
const QUICK_RETRY = { max_attempts: 2, backoff: { initial_ms: 100, max_ms: 100, factor: 1, jitter: 0 } };

async function post(base: string, path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${f.secrets.apiKey}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as { title?: string; issues?: Array<{ path: string; message: string }> } };
}

/** The pushes to one path, once `n` of them have arrived. */
async function pushesTo(path: string, n: number): Promise<ReceivedPush[]> {
  await expect.poll(() => f.endpoint.received.filter((p) => p.path === path).length, { timeout: 20_000, interval: 50 }).toBe(n);
  return f.endpoint.received.filter((p) => p.path === path);
}

const spanOf = (push: ReceivedPush) => String(push.headers['sluice-lease-id']).replaceAll('-', '').slice(0, 16);

async function exercise(base: string, name: string) {
  f.endpoint.reply((push) =>
    push.path === `/${name}/retried` && push.headers['sluice-attempt'] === '1' ? { status: 500 } : { status: 200 },
  );

  // A field: each attempt a child span of the enqueuer's, the trace id, flags and tracestate kept.
  const given = await post(base, '/v1/tasks', {
    url: `${f.endpoint.url}/${name}/retried`,
    traceparent: `00-${TRACE}-${PARENT}-01`,
    tracestate: 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7',
    ...QUICK_RETRY,
  });
  expect(given.status).toBe(201);
  const [first, second] = await pushesTo(`/${name}/retried`, 2);
  for (const push of [first!, second!]) {
    expect(push.headers.traceparent).toBe(`00-${TRACE}-${spanOf(push)}-01`);
    expect(push.headers.tracestate).toBe('congo=t61rcWkgMzE,rojo=00f067aa0ba902b7');
  }
  expect(spanOf(first!)).not.toBe(spanOf(second!));

  // The enqueue request's own header, for each task of a batch that names no trace of its own.
  const own = `00-${'1'.repeat(32)}-${'2'.repeat(16)}-00`;
  const batch = await post(
    base,
    '/v1/tasks/batch',
    {
      tasks: [{ url: `${f.endpoint.url}/${name}/inherited` }, { url: `${f.endpoint.url}/${name}/own`, headers: { TraceParent: own } }],
    },
    { traceparent: `00-${TRACE}-${PARENT}-01`, tracestate: 'congo=t61rcWkgMzE' },
  );
  expect(batch.status).toBe(201);
  const [inherited] = await pushesTo(`/${name}/inherited`, 1);
  expect(inherited!.headers.traceparent).toBe(`00-${TRACE}-${spanOf(inherited!)}-01`);
  expect(inherited!.headers.tracestate).toBe('congo=t61rcWkgMzE');
  const [ownPush] = await pushesTo(`/${name}/own`, 1);
  expect(ownPush!.headers.traceparent).toBe(`00-${'1'.repeat(32)}-${spanOf(ownPush!)}-00`);
  expect(ownPush!.headers.tracestate).toBeUndefined();

  // A malformed request header starts no trace (W3C: a receiver ignores it); a malformed field is refused.
  const ignored = await post(
    base,
    '/v1/tasks',
    { url: `${f.endpoint.url}/${name}/untraced` },
    { traceparent: `00-${'0'.repeat(32)}-${PARENT}-01` },
  );
  expect(ignored.status).toBe(201);
  const [untraced] = await pushesTo(`/${name}/untraced`, 1);
  expect(untraced!.headers.traceparent).toBeUndefined();
  const refused = await post(base, '/v1/tasks', { url: `${f.endpoint.url}/${name}/never`, traceparent: `01-${TRACE}-${PARENT}` });
  expect(refused.status).toBe(400);
  expect(refused.body.issues).toEqual([{ path: 'traceparent', message: expect.stringContaining('W3C traceparent') }]);
  const both = await post(base, '/v1/tasks', {
    url: `${f.endpoint.url}/${name}/never`,
    traceparent: `00-${TRACE}-${PARENT}-01`,
    headers: { traceparent: `00-${TRACE}-${PARENT}-01` },
  });
  expect(both.status).toBe(400);
  expect(both.body.issues?.map((e) => e.path)).toEqual(['traceparent']);
}

describe('trace propagation', () => {
  it('on the Worker', async () => {
    await exercise(f.worker.url, 'worker');
  }, 60_000);

  describe('on the Node server', () => {
    const side = useNodeBeside(f);
    it('does the same', async () => {
      await exercise(side.node.url, 'node');
    }, 60_000);
  });
});
