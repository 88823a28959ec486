/**
 * The /metrics exposition before anything is counted: every series an alert may watch is there
 * from the start, at zero (`rate()` and `absent()` need a series to exist), and the build is named.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderMetrics } from '../../src/api/prometheus.ts';
import { COUNTED } from '../../src/core/metrics.ts';
import { TASK_STATUSES } from '../../src/core/types.ts';
import type { MetricsRead } from '../../src/db/metrics.ts';
import { SLUICE_VERSION } from '../../src/version.ts';
import { testConfig } from '../helpers/config.ts';

const { config } = await testConfig('postgres://u:p@db.example.com/sluice', {
  SLUICE_QUEUES: '{"emails":{"concurrency":4},"hooks":{"concurrency":64,"adaptive":true}}',
});

const nothingYet: MetricsRead = {
  counters: [],
  taskCounts: [],
  countedAt: null,
  leased: new Map(),
  waiting: new Map(),
  keys: [],
  learnt: [],
  endpoints: [],
};

const lines = (text: string) => new Set(text.split('\n'));

describe('GET /metrics before anything is counted', () => {
  it('writes every counter, per known queue and label value, at zero, and a histogram per queue', () => {
    const text = lines(renderMetrics(config, nothingYet, new Map()));
    for (const outcome of COUNTED.pushes.values) expect(text).toContain(`sluice_pushes_total{queue="emails",outcome="${outcome}"} 0`);
    for (const limit of COUNTED.held_back.values) expect(text).toContain(`sluice_held_back_total{queue="emails",limit="${limit}"} 0`);
    expect(text).toContain('sluice_acquired_total{queue="emails"} 0');
    expect(text).toContain('sluice_lease_expiries_total{queue="emails"} 0');
    expect(text).toContain('sluice_claim_passes_total 0');
    expect(text).toContain('sluice_dispatch_runs_total 0');
    expect(text).toContain('sluice_push_duration_seconds_bucket{queue="emails",le="+Inf"} 0');
    expect(text).toContain('sluice_due_to_push_seconds_count{queue="emails"} 0');
    for (const signal of COUNTED.overloads.values) expect(text).toContain(`sluice_overloads_total{queue="emails",signal="${signal}"} 0`);
  });

  it("shows an adaptive queue's learnt limits and the levels held, and no learnt limit of a queue that is not adaptive", () => {
    const learnt = [
      { queue: 'hooks', key: null, effective: 7, held: false },
      { queue: 'hooks', key: 'acme', effective: 2, held: true },
      { queue: 'emails', key: null, effective: 3, held: true },
    ];
    const text = lines(renderMetrics(config, { ...nothingYet, learnt }, new Map()));
    expect(text).toContain('sluice_learnt_limit{queue="hooks",key=""} 7');
    expect(text).toContain('sluice_learnt_limit{queue="hooks",key="acme"} 2');
    expect([...text].some((l) => l.startsWith('sluice_learnt_limit{queue="emails"'))).toBe(false);
    expect(text).toContain('sluice_level_held{queue="hooks",key="acme"} 1');
    expect(text).toContain('sluice_level_held{queue="emails",key=""} 1');
  });

  it('shows each origin it is given: its state as a number (0 healthy, 1 probing, 2 paused) and its failures', () => {
    const endpoints = [
      { origin: 'https://down.example', state: 'paused' as const, failures: 12 },
      { origin: 'https://trying.example:8443', state: 'probing' as const, failures: 11 },
      { origin: 'http://127.0.0.1:8788', state: 'healthy' as const, failures: 0 },
    ];
    const text = renderMetrics(config, { ...nothingYet, endpoints }, new Map());
    expect(text.split('\n').filter((l) => /^(# TYPE )?sluice_endpoint_/.test(l))).toEqual([
      '# TYPE sluice_endpoint_state gauge',
      'sluice_endpoint_state{origin="https://down.example"} 2',
      'sluice_endpoint_state{origin="https://trying.example:8443"} 1',
      'sluice_endpoint_state{origin="http://127.0.0.1:8788"} 0',
      '# TYPE sluice_endpoint_failures_total counter',
      'sluice_endpoint_failures_total{origin="https://down.example"} 12',
      'sluice_endpoint_failures_total{origin="https://trying.example:8443"} 11',
      'sluice_endpoint_failures_total{origin="http://127.0.0.1:8788"} 0',
    ]);
    // No origin known: the families are there, with no series (an origin's series starts when it is first pushed to).
    const none = renderMetrics(config, nothingYet, new Map());
    expect(none).toContain('# TYPE sluice_endpoint_state gauge');
    expect(none).not.toMatch(/^sluice_endpoint_/m);
  });

  it('counts tasks per status at zero once counted, and claims no count before', () => {
    expect(renderMetrics(config, nothingYet, new Map())).not.toMatch(/^sluice_tasks\{/m);
    const counted = { ...nothingYet, countedAt: new Date(), taskCounts: [{ queue: 'emails', status: 'dead', n: 3 }] };
    const text = lines(renderMetrics(config, counted, new Map()));
    for (const status of TASK_STATUSES) {
      expect(text).toContain(`sluice_tasks{queue="emails",status="${status}"} ${status === 'dead' ? 3 : 0}`);
    }
  });

  it('names the version that answered, the one package.json says', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(SLUICE_VERSION).toBe(pkg.version);
    expect(lines(renderMetrics(config, nothingYet, new Map()))).toContain(`sluice_build_info{version="${pkg.version}"} 1`);
  });
});
