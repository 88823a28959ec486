/**
 * GET /metrics on the Node server, over real HTTP and a real Postgres: scraped while tasks run
 * and parsed with a Prometheus text parser; counters only rise (across a restart too), the
 * figures agree with what the endpoint saw, limits that hold tasks back are named, and a scrape
 * reads no more of the tasks table than its leased rows.
 */
import parsePrometheus from 'parse-prometheus-text-format';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricsRead, taskCountsRefresh } from '../../src/db/metrics.ts';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { generateApiKey } from '../../src/security/api-keys.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';

interface Family {
  name: string;
  type: string;
  metrics: Array<{ labels?: Record<string, string>; value?: string; buckets?: Record<string, string>; count?: string; sum?: string }>;
}

const TASKS = 60;

let t: TestDatabase;
let endpoint: TestEndpoint;
let secrets: TestSecrets;
let env: Record<string, string>;
let sluice: NodeSluice;
let metricsKey: string;

beforeAll(async () => {
  [t, endpoint, secrets] = await Promise.all([createTestDatabase(), startEndpoint(), makeSecrets()]);
  const metricsReader = await generateApiKey('prometheus', ['metrics:read']);
  metricsKey = metricsReader.key;
  const keys = [...JSON.parse(secrets.apiKeysJson), metricsReader.entry];
  env = testEnv(secrets, t.url, {
    SLUICE_API_KEYS: JSON.stringify(keys),
    SLUICE_CLUSTER_CAP: '8',
    SLUICE_QUEUES: JSON.stringify({ reports: { concurrency: 4, key_concurrency: 1 } }),
    SLUICE_METRICS_TOP_ENDPOINTS: '3',
  });
  sluice = await startNodeSluice({ env });
});
afterAll(async () => {
  await sluice?.close();
  await endpoint?.close();
  await t?.drop();
});

interface Scrape {
  text: string;
  families: Map<string, Family>;
}

async function scrape(base = sluice.url, key = metricsKey): Promise<Scrape> {
  const res = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${key}` } });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  // The parser throws on any line that is not valid exposition text.
  const families = parsePrometheus(text) as Family[];
  return { text, families: new Map(families.map((f) => [f.name, f])) };
}

/** Sum of a counter's or gauge's samples whose labels include `where`. */
function total({ families }: Scrape, name: string, where: Record<string, string> = {}): number {
  const family = families.get(name);
  if (!family) return 0;
  return family.metrics
    .filter((m) => Object.entries(where).every(([k, v]) => m.labels?.[k] === v))
    .reduce((sum, m) => sum + Number(m.value ?? 0), 0);
}

/**
 * One queue's series of a histogram. The parser folds every series of a histogram into one and
 * keeps `_sum`/`_count` only when unlabelled, so it is given that one series, its label removed.
 */
function histogram({ text }: Scrape, name: string, queue: string): { buckets: Record<string, number>; count: number; sum: number } {
  const label = `queue="${queue}"`;
  const lines = text
    .split('\n')
    .filter((l) => l === `# TYPE ${name} histogram` || (l.startsWith(`${name}_`) && l.includes(label)))
    .map((l) => l.replace(`{${label}}`, '').replace(`${label},`, ''));
  const [family] = parsePrometheus(`${lines.join('\n')}\n`) as Family[];
  const series = family?.metrics[0];
  return {
    buckets: Object.fromEntries(Object.entries(series?.buckets ?? {}).map(([le, n]) => [le, Number(n)])),
    count: Number(series?.count ?? 0),
    sum: Number(series?.sum ?? 0),
  };
}

/** Every counter, and every histogram's count, sum and buckets, by name and labels. */
function counterValues(s: Scrape): Map<string, number> {
  const out = new Map<string, number>();
  for (const f of s.families.values()) {
    if (f.type === 'COUNTER') for (const m of f.metrics) out.set(`${f.name}${JSON.stringify(m.labels ?? {})}`, Number(m.value));
    if (f.type !== 'HISTOGRAM') continue;
    const queues = new Set([...s.text.matchAll(new RegExp(`^${f.name}_count\\{queue="([^"]*)"\\}`, 'gm'))].map((m) => m[1]!));
    for (const queue of queues) {
      const h = histogram(s, f.name, queue);
      out.set(`${f.name}{${queue}}:count`, h.count);
      out.set(`${f.name}{${queue}}:sum`, h.sum);
      for (const [le, n] of Object.entries(h.buckets)) out.set(`${f.name}{${queue}}:le=${le}`, n);
    }
  }
  return out;
}

function expectRisen(before: Map<string, number>, after: Map<string, number>): void {
  for (const [id, value] of before) {
    expect(after.has(id), `${id} is still there`).toBe(true);
    expect(after.get(id)!, `${id} did not fall`).toBeGreaterThanOrEqual(value);
  }
}

async function enqueue(body: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${sluice.url}/v1/tasks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url: `${endpoint.url}/work`, ...body }),
  });
  expect(res.status).toBe(201);
}

describe('GET /metrics', () => {
  it('asks for a metrics:read or admin key', async () => {
    expect((await fetch(`${sluice.url}/metrics`)).status).toBe(401);
    const reader = await fetch(`${sluice.url}/metrics`, { headers: { authorization: `Bearer ${secrets.readKey}` } });
    expect(reader.status).toBe(403);
  });

  it("says which version answered and, on Node, the serving process's memory and CPU", async () => {
    const s = await scrape();
    expect(total(s, 'sluice_build_info')).toBe(1);
    expect(total(s, 'process_resident_memory_bytes')).toBeGreaterThan(1_000_000);
    expect(total(s, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(1_000_000);
    expect(total(s, 'process_cpu_seconds_total')).toBeGreaterThan(0);
    expect(total(s, 'process_start_time_seconds')).toBeLessThanOrEqual(Date.now() / 1000);
  });

  it('counts what the dispatcher does, scraped while it runs, and the counters only rise', async () => {
    // Slow pushes, one key of "reports" per pair of tasks: the key limit and the queue limit bind.
    endpoint.reply(() => ({ status: 200, delayMs: 30 }));
    const scrapes: Array<Map<string, number>> = [counterValues(await scrape())];
    for (let i = 0; i < TASKS; i++) await enqueue({ queue: 'reports', concurrency_key: `customer-${i % 3}`, body: { i } });
    while (endpoint.received.length < TASKS) {
      scrapes.push(counterValues(await scrape()));
      await new Promise((r) => setTimeout(r, 50));
    }
    // Every push answered and settled, and the counters written (the meter writes once a second).
    await expect
      .poll(async () => total(await scrape(), 'sluice_pushes_total', { queue: 'reports', outcome: 'succeeded' }), {
        timeout: 10_000,
      })
      .toBe(TASKS);
    const last = await scrape();
    scrapes.push(counterValues(last));
    for (let i = 1; i < scrapes.length; i++) expectRisen(scrapes[i - 1]!, scrapes[i]!);

    expect(total(last, 'sluice_acquired_total', { queue: 'reports' })).toBe(TASKS);
    expect(histogram(last, 'sluice_due_to_push_seconds', 'reports').count).toBe(TASKS);
    const pushSeconds = histogram(last, 'sluice_push_duration_seconds', 'reports');
    expect(pushSeconds.count).toBe(TASKS);
    expect(pushSeconds.buckets['+Inf']).toBe(TASKS);
    // Every push took at least the endpoint's 30 ms.
    expect(pushSeconds.sum).toBeGreaterThanOrEqual((TASKS * 30) / 1000);
    expect(pushSeconds.buckets['0.025']).toBe(0);
    // Three keys of limit 1 under a queue limit of 4: passes found tasks due and every key full.
    expect(total(last, 'sluice_held_back_total', { queue: 'reports', limit: 'key' })).toBeGreaterThan(0);
    expect(total(last, 'sluice_claim_passes_total')).toBeGreaterThan(0);
    expect(total(last, 'sluice_dispatch_runs_total')).toBeGreaterThan(0);
    // Limits, as configured.
    expect(total(last, 'sluice_cluster_slots_limit')).toBe(8);
    expect(total(last, 'sluice_queue_slots_limit', { queue: 'reports' })).toBe(4);
  });

  it('shows the slots held now, per queue and for the busiest keys, with their limits', async () => {
    // The endpoint keeps each lease: the slots stay taken until the leases expire.
    endpoint.reply(() => ({ status: 202, headers: { 'sluice-ack': 'lease' } }));
    const received = endpoint.received.length;
    for (let i = 0; i < 3; i++) await enqueue({ queue: 'reports', concurrency_key: `held-${i}`, lease_ms: 60_000 });
    await endpoint.waitFor(received + 3);
    await expect.poll(async () => total(await scrape(), 'sluice_queue_slots_active', { queue: 'reports' })).toBe(3);
    const now = await scrape();
    expect(total(now, 'sluice_cluster_slots_active')).toBe(3);
    for (let i = 0; i < 3; i++) {
      expect(total(now, 'sluice_key_slots_active', { queue: 'reports', key: `held-${i}` })).toBe(1);
      expect(total(now, 'sluice_key_slots_limit', { queue: 'reports', key: `held-${i}` })).toBe(1);
    }
    await expect
      .poll(async () => total(await scrape(), 'sluice_pushes_total', { queue: 'reports', outcome: 'lease_kept' }), { timeout: 10_000 })
      .toBe(3);
  });

  it('counts tasks per queue and status without a scrape reading the tasks table', async () => {
    // A large table of finished tasks: a read that walked it would show as a sequential scan.
    await t.db.query(
      `insert into sluice.tasks (queue, url, status, finished_at, max_attempts, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, timeout_ms, lease_ms)
       select 'archive', 'http://127.0.0.1:9/x', 'succeeded', now(), 1, 1000, 1000, 2, 0, 1000, 60000 from generate_series(1, 20000)`,
    );
    await t.db.query('analyze sluice.tasks');
    // The dispatcher counts (here at once; on its own every 15 s).
    await taskCountsRefresh(t.db, 0);
    // What a scrape reads, on one connection whose statistics are flushed before they are read.
    const client = new pg.Client(t.url);
    await client.connect();
    try {
      const db = {
        query: async <R>(text: string, params?: readonly unknown[]) => (await client.query(text, params as unknown[])).rows as R[],
      };
      const seqScans = async () => {
        await client.query('select pg_stat_force_next_flush()');
        await client.query('select pg_stat_clear_snapshot()');
        const [row] = await db.query<{ n: string }>(
          `select seq_scan::text as n from pg_stat_user_tables where relid = 'sluice.tasks'::regclass`,
        );
        return Number(row!.n);
      };
      // The measure works: a read of the whole table shows.
      const start = await seqScans();
      await db.query(`select count(*) from sluice.all_tasks where url like '%/x'`);
      expect(await seqScans()).toBeGreaterThan(start);
      const before = await seqScans();
      await metricsRead(db, 10);
      expect(await seqScans()).toBe(before);
    } finally {
      await client.end();
    }
    const families = await scrape();
    expect(total(families, 'sluice_tasks', { queue: 'archive', status: 'succeeded' })).toBe(20_000);
    expect(total(families, 'sluice_tasks', { queue: 'reports', status: 'succeeded' })).toBe(TASKS);
    expect(total(families, 'sluice_tasks_counted_timestamp_seconds')).toBeGreaterThan(Date.now() / 1000 - 60);
  });

  it('shows endpoint origins: their state and failures, those not healthy first, at most SLUICE_METRICS_TOP_ENDPOINTS', async () => {
    // An origin of its own that fails every push: ten failures in a row (the default) pause it.
    const down = await startEndpoint();
    try {
      down.reply(() => ({ status: 502, body: 'bad gateway' }));
      const origin = new URL(down.url).origin;
      for (let i = 0; i < 10; i++) await enqueue({ queue: 'hooks', url: `${down.url}/hook/${i}`, max_attempts: 1 });
      await expect.poll(async () => total(await scrape(), 'sluice_endpoint_state', { origin }), { timeout: 10_000 }).toBe(2);
      const s = await scrape();
      expect(total(s, 'sluice_endpoint_failures_total', { origin })).toBe(10);
      // The endpoint the other tests pushed to answered every push: healthy, no failure.
      const healthy = new URL(endpoint.url).origin;
      expect(s.families.get('sluice_endpoint_state')?.metrics.find((m) => m.labels?.origin === healthy)?.value).toBe('0');
      expect(total(s, 'sluice_endpoint_failures_total', { origin: healthy })).toBe(0);

      // More origins than SLUICE_METRICS_TOP_ENDPOINTS (3): the paused one first, then the most failures.
      await t.db.query(
        `insert into sluice.endpoints (origin, failures_total)
         values ('https://a.example', 1), ('https://b.example', 30), ('https://c.example', 5), ('https://d.example', 0)`,
      );
      const bounded = await scrape();
      const shown = (name: string) => (bounded.families.get(name)?.metrics ?? []).map((m) => [m.labels?.origin, Number(m.value)]);
      expect(shown('sluice_endpoint_state')).toEqual([
        [origin, 2],
        ['https://b.example', 0],
        ['https://c.example', 0],
      ]);
      expect(shown('sluice_endpoint_failures_total')).toEqual([
        [origin, 10],
        ['https://b.example', 30],
        ['https://c.example', 5],
      ]);
      // A scrape asking for none shows none.
      expect((await metricsRead(t.db, 10)).endpoints).toEqual([]);
    } finally {
      await down.close();
    }
  });

  it('keeps its counters across a restart', async () => {
    const before = counterValues(await scrape());
    await sluice.close();
    sluice = await startNodeSluice({ env });
    const after = counterValues(await scrape());
    expectRisen(before, after);
    expect(after.get('sluice_acquired_total{"queue":"reports"}')).toBeGreaterThanOrEqual(TASKS);
    expect(after.get('sluice_due_to_push_seconds{reports}:count')).toBeGreaterThanOrEqual(TASKS);
  });
});
