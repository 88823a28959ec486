/**
 * GET /metrics through the real Worker in workerd: the pusher shards' counters reach Postgres
 * (written once per run, not per task), the cron counts tasks, endpoint origins show their
 * state and failures, and the text parses.
 */
import parsePrometheus from 'parse-prometheus-text-format';
import { describe, expect, it } from 'vitest';
import { generateApiKey } from '../../src/security/api-keys.ts';
import { startEndpoint } from '../helpers/endpoint.ts';
import { useWorkerFixture } from '../helpers/worker-fixture.ts';

const prometheus = await generateApiKey('prometheus', ['metrics:read']);
const f = useWorkerFixture((f) => ({
  SLUICE_API_KEYS: JSON.stringify([...JSON.parse(f.secrets.apiKeysJson), prometheus.entry]),
  SLUICE_CLUSTER_CAP: '2',
  SLUICE_QUEUES: JSON.stringify({ mail: { key_concurrency: 1 } }),
  SLUICE_ENDPOINT_PAUSE_AFTER: '3',
}));

interface Family {
  name: string;
  metrics: Array<{ labels?: Record<string, string>; value?: string }>;
}

async function scrape(): Promise<Map<string, Family>> {
  const res = await fetch(`${f.worker.url}/metrics`, { headers: { authorization: `Bearer ${prometheus.key}` } });
  expect(res.status).toBe(200);
  return new Map((parsePrometheus(await res.text()) as Family[]).map((family) => [family.name, family]));
}

function value(families: Map<string, Family>, name: string, labels: Record<string, string>): number {
  const sample = families.get(name)?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  return Number(sample?.value ?? 0);
}

describe('GET /metrics on the Worker', () => {
  it('shows what the pusher shards did, and the tasks the cron counted', async () => {
    f.endpoint.reply(() => ({ status: 200, delayMs: 20 }));
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await fetch(`${f.worker.url}/v1/tasks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${f.secrets.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ queue: 'mail', url: `${f.endpoint.url}/m`, concurrency_key: `user-${i % 2}` }),
      });
      expect(res.status).toBe(201);
      ids.push(((await res.json()) as { id: string }).id);
    }
    await expect
      .poll(async () => value(await scrape(), 'sluice_pushes_total', { queue: 'mail', outcome: 'succeeded' }), { timeout: 20_000 })
      .toBe(6);
    const after = await scrape();
    expect(value(after, 'sluice_acquired_total', { queue: 'mail' })).toBe(6);
    expect(value(after, 'sluice_cluster_slots_limit', {})).toBe(2);
    expect(value(after, 'sluice_dispatch_runs_total', {})).toBeGreaterThan(0);
    // Every outcome has its series from the start, and the build is named; a Worker has no process.
    const dead = after.get('sluice_pushes_total')?.metrics.find((m) => m.labels?.queue === 'mail' && m.labels?.outcome === 'dead');
    expect(dead?.value).toBe('0');
    expect(value(after, 'sluice_build_info', {})).toBe(1);
    expect(after.has('process_resident_memory_bytes')).toBe(false);
    // Task counts come from the cron's minute.
    await f.worker.scheduled();
    expect(value(await scrape(), 'sluice_tasks', { queue: 'mail', status: 'succeeded' })).toBe(6);
  });

  it('shows an origin that failed SLUICE_ENDPOINT_PAUSE_AFTER times in a row as paused (2), with its failures', async () => {
    const down = await startEndpoint();
    try {
      down.reply(() => ({ status: 500, body: 'down' }));
      f.endpoint.reply(() => ({ status: 200 }));
      const origin = new URL(down.url).origin;
      const up = new URL(f.endpoint.url).origin;
      for (const url of [`${down.url}/hook`, `${down.url}/hook`, `${down.url}/hook`, `${f.endpoint.url}/fine`]) {
        const res = await fetch(`${f.worker.url}/v1/tasks`, {
          method: 'POST',
          headers: { authorization: `Bearer ${f.secrets.apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ queue: 'hooks', url, max_attempts: 1 }),
        });
        expect(res.status).toBe(201);
      }
      await expect.poll(async () => value(await scrape(), 'sluice_endpoint_state', { origin }), { timeout: 20_000 }).toBe(2);
      const after = await scrape();
      expect(value(after, 'sluice_endpoint_failures_total', { origin })).toBe(3);
      // An origin that answered 200: healthy (0), with a series of its own at 0.
      const healthy = (name: string) => after.get(name)?.metrics.find((m) => m.labels?.origin === up)?.value;
      expect([healthy('sluice_endpoint_state'), healthy('sluice_endpoint_failures_total')]).toEqual(['0', '0']);
    } finally {
      await down.close();
    }
  });
});
