/**
 * `npm run bench:api-db`: how the Worker's API should reach Postgres. Two Workers on one
 * embedded Postgres, alike but for SLUICE_API_DATABASE (`http`: Neon's one-shot HTTP query
 * endpoint; `websocket`: a Neon Pool opened and closed per request), both through the local
 * stand-in for Neon's proxy. Requests alternate between them, so the machine's noise falls on
 * both alike. Prints p50/p95 per request kind; asserts nothing.
 */
import { startWorker } from '../src/node/worker-runtime.ts';
import { benchSetup } from './setup.ts';

const N = Number(process.env.BENCH_REQUESTS ?? 300);

const setup = await benchSetup();
const { env, script } = setup;
const paths = ['http', 'websocket'] as const;
const workers = await Promise.all(paths.map((p) => startWorker({ script, vars: { ...env, SLUICE_API_DATABASE: p } })));

const times: Record<string, Record<string, number[]>> = { http: {}, websocket: {} };
/** Times a request to its last byte; returns the body. */
async function timed(path: (typeof paths)[number], kind: string, request: () => Promise<Response>): Promise<string> {
  const started = performance.now();
  const res = await request();
  const text = await res.text();
  const list = times[path]![kind] ?? [];
  list.push(performance.now() - started);
  times[path]![kind] = list;
  if (res.status >= 400) throw new Error(`${kind} via ${path}: ${res.status} ${text}`);
  return text;
}
const headers = { authorization: `Bearer ${setup.apiKey}`, 'content-type': 'application/json' };

try {
  for (let i = 0; i < N; i++) {
    for (const [w, path] of workers.map((w, j) => [w, paths[j]!] as const)) {
      // Delayed an hour: the dispatcher stays out of the measurement.
      const created = await timed(path, 'POST /v1/tasks', () =>
        fetch(`${w.url}/v1/tasks`, { method: 'POST', headers, body: JSON.stringify({ url: 'http://127.0.0.1:9/x', delay_ms: 3_600_000 }) }),
      );
      const { id } = JSON.parse(created) as { id: string };
      await timed(path, 'GET /v1/tasks/:id', () => fetch(`${w.url}/v1/tasks/${id}`, { headers }));
      await timed(path, 'GET /v1/tasks?limit=20', () => fetch(`${w.url}/v1/tasks?limit=20`, { headers }));
      await timed(path, 'POST /v1/tasks (dedup_key: a transaction)', () =>
        fetch(`${w.url}/v1/tasks`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ url: 'http://127.0.0.1:9/x', delay_ms: 3_600_000, dedup_key: `d${i}` }),
        }),
      );
    }
  }
  const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]!.toFixed(2);
  console.log(`# API database path, ${N} requests of each kind per path, alternating`);
  for (const kind of Object.keys(times.http!)) {
    const line = paths.map((p) => `${p} p50 ${pct(times[p]![kind]!, 0.5)} ms / p95 ${pct(times[p]![kind]!, 0.95)} ms`).join('; ');
    console.log(`- ${kind}: ${line}`);
  }
} finally {
  await Promise.all(workers.map((w) => w.close()));
  await setup.close();
}
