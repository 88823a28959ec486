/**
 * GET /metrics in the Prometheus text format (version 0.0.4): the counters dispatchers keep in
 * Postgres, the task counts they make now and then, and the slots held now with their limits.
 */
import type { Config } from '../config.ts';
import { resolveKeyLimit, resolveQueueLimits } from '../core/limits.ts';
import { COUNTED, type MetricDefinition, SECONDS_BUCKETS } from '../core/metrics.ts';
import type { EndpointState } from '../core/outcome.ts';
import { TASK_STATUSES } from '../core/types.ts';
import type { MetricsRead } from '../db/metrics.ts';
import type { QueueOverride } from '../db/queues.ts';
import { SLUICE_VERSION } from '../version.ts';
import type { ProcessStats } from './context.ts';

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** `sluice_endpoint_state`'s values, worse as they rise: one series per origin, an alert on `== 2`. */
const ENDPOINT_STATE_VALUES: Readonly<Record<EndpointState, number>> = { healthy: 0, probing: 1, paused: 2 };

type Labels = Record<string, string>;

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function sample(name: string, labels: Labels, value: number): string {
  const pairs = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`);
  const text = Number.isFinite(value) ? String(value) : value > 0 ? '+Inf' : '-Inf';
  return `${name}${pairs.length ? `{${pairs.join(',')}}` : ''} ${text}`;
}

function family(name: string, type: string, help: string, samples: string[]): string[] {
  return [`# HELP ${name} ${help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`, `# TYPE ${name} ${type}`, ...samples];
}

/**
 * A counted metric's family: a series for every row, and a zero-valued one for every known queue
 * (when per queue) and label value that has none yet, so that alerts see each from the start.
 */
function counted(def: MetricDefinition, rows: MetricsRead['counters'], queues: readonly string[]): string[] {
  const labels = (row: { queue: string; label: string }): Labels => ({
    ...(def.perQueue ? { queue: row.queue } : {}),
    ...(def.label ? { [def.label]: row.label } : {}),
  });
  const allQueues = def.perQueue ? [...new Set([...queues, ...rows.map((r) => r.queue)])].sort() : [''];
  if (def.type !== 'histogram') {
    const values = new Map(rows.map((r) => [`${r.queue}\u0000${r.label}`, r.value]));
    const labelValues = def.label ? [...new Set([...(def.values ?? []), ...rows.map((r) => r.label)])] : [''];
    const series = allQueues.flatMap((queue) => labelValues.map((label) => ({ queue, label })));
    return family(
      def.name,
      def.type,
      def.help,
      series.map((r) => sample(def.name, labels(r), values.get(`${r.queue}\u0000${r.label}`) ?? 0)),
    );
  }
  const byQueue = new Map<string, Map<string, number>>(allQueues.map((q) => [q, new Map()]));
  for (const r of rows) {
    const buckets = byQueue.get(r.queue) ?? new Map<string, number>();
    buckets.set(r.label, (buckets.get(r.label) ?? 0) + r.value);
    byQueue.set(r.queue, buckets);
  }
  const samples: string[] = [];
  for (const [queue, buckets] of [...byQueue].sort(([a], [b]) => a.localeCompare(b))) {
    let cumulative = 0;
    for (const le of [...SECONDS_BUCKETS.map(String), '+Inf']) {
      cumulative += buckets.get(le) ?? 0;
      samples.push(sample(`${def.name}_bucket`, { queue, le }, cumulative));
    }
    samples.push(sample(`${def.name}_sum`, { queue }, buckets.get('sum') ?? 0));
    samples.push(sample(`${def.name}_count`, { queue }, buckets.get('count') ?? 0));
  }
  return family(def.name, 'histogram', def.help, samples);
}

/** The serving process's own series, under the names Prometheus clients use; none on Workers. */
function processFamilies(p: ProcessStats | null): string[] {
  if (!p) return [];
  const series: Array<[name: string, type: string, help: string, value: number]> = [
    ['process_cpu_seconds_total', 'counter', 'CPU time of the process that answered, user and system, in seconds.', p.cpuSeconds],
    ['process_resident_memory_bytes', 'gauge', 'Resident memory of the process that answered, in bytes.', p.residentBytes],
    ['process_start_time_seconds', 'gauge', 'When the process that answered started (Unix time).', p.startTimeSeconds],
    ['nodejs_heap_size_used_bytes', 'gauge', 'JavaScript heap in use in the process that answered, in bytes.', p.heapUsedBytes],
  ];
  return series.flatMap(([name, type, help, value]) => family(name, type, help, [sample(name, {}, value)]));
}

/** The whole exposition. */
export function renderMetrics(
  config: Config,
  read: MetricsRead,
  overrides: Map<string, QueueOverride>,
  stats: ProcessStats | null = null,
): string {
  const queues = [
    ...new Set([
      ...Object.keys(config.queues),
      ...overrides.keys(),
      ...read.leased.keys(),
      ...read.waiting.keys(),
      ...read.taskCounts.map((c) => c.queue),
    ]),
  ].sort();
  const limits = new Map(queues.map((q) => [q, resolveQueueLimits(config.queues[q], overrides.get(q)?.settings ?? null)]));
  const clusterActive = [...read.leased.values()].reduce((a, b) => a + b, 0);
  // Once counted, every known queue has a series per status, zero when it has no such task.
  const counts = new Map(read.taskCounts.map((c) => [`${c.queue}\u0000${c.status}`, c.n]));
  const countedQueues = read.countedAt ? [...new Set([...queues, ...read.taskCounts.map((c) => c.queue)])].sort() : [];
  const lines: string[] = [
    ...processFamilies(stats),
    ...family('sluice_build_info', 'gauge', 'Always 1; its label is the version of Sluice that answered the scrape.', [
      sample('sluice_build_info', { version: SLUICE_VERSION }, 1),
    ]),
    ...family(
      'sluice_tasks',
      'gauge',
      'Tasks per queue and status, as counted at sluice_tasks_counted_timestamp_seconds (every 15 s on Node, every minute on the Worker).',
      countedQueues.flatMap((queue) =>
        TASK_STATUSES.map((status) => sample('sluice_tasks', { queue, status }, counts.get(`${queue}\u0000${status}`) ?? 0)),
      ),
    ),
    ...family(
      'sluice_tasks_counted_timestamp_seconds',
      'gauge',
      'When sluice_tasks was counted (Unix time).',
      read.countedAt ? [sample('sluice_tasks_counted_timestamp_seconds', {}, read.countedAt.getTime() / 1000)] : [],
    ),
    ...family('sluice_cluster_slots_active', 'gauge', 'Live leases across all queues: cluster slots held now.', [
      sample('sluice_cluster_slots_active', {}, clusterActive),
    ]),
    ...family(
      'sluice_cluster_slots_limit',
      'gauge',
      'The cluster cap (SLUICE_CLUSTER_CAP); absent when there is none.',
      config.clusterCap === null ? [] : [sample('sluice_cluster_slots_limit', {}, config.clusterCap)],
    ),
    ...family(
      'sluice_queue_slots_active',
      'gauge',
      "Live leases per queue: the queue's slots held now.",
      queues.map((q) => sample('sluice_queue_slots_active', { queue: q }, read.leased.get(q) ?? 0)),
    ),
    ...family(
      'sluice_queue_slots_waiting',
      'gauge',
      "Tasks waiting on children that still hold the queue's slot (they did not lend it to a child); the claim counts them with the active ones.",
      queues.map((q) => sample('sluice_queue_slots_waiting', { queue: q }, read.waiting.get(q) ?? 0)),
    ),
    ...family(
      'sluice_queue_slots_limit',
      'gauge',
      "The queue's concurrency limit in force (run-time override, else the environment); absent when it has none.",
      queues.flatMap((q) => {
        const limit = limits.get(q)?.concurrency.value ?? null;
        return limit === null ? [] : [sample('sluice_queue_slots_limit', { queue: q }, limit)];
      }),
    ),
    ...family(
      'sluice_queue_paused',
      'gauge',
      '1 when the queue is paused (nothing of it is claimed), else 0.',
      queues.map((q) => sample('sluice_queue_paused', { queue: q }, limits.get(q)?.paused.value ? 1 : 0)),
    ),
    ...family(
      'sluice_key_slots_active',
      'gauge',
      'Live leases per concurrency key, for the keys holding the most slots in each queue (SLUICE_METRICS_TOP_KEYS).',
      read.keys.map((k) => sample('sluice_key_slots_active', { queue: k.queue, key: k.key }, k.active)),
    ),
    ...family(
      'sluice_key_slots_limit',
      'gauge',
      "The key's limit in force (run-time override, else its first task's concurrency_limit, else the queue's key_concurrency), for the keys in sluice_key_slots_active that have one.",
      read.keys.flatMap((k) => {
        const queueKey = limits.get(k.queue)?.keyConcurrency ?? { value: null, source: 'default' as const };
        const limit = resolveKeyLimit(k.key, k.override, k.taskLimit, queueKey).value;
        return limit === null ? [] : [sample('sluice_key_slots_limit', { queue: k.queue, key: k.key }, limit)];
      }),
    ),
    ...family(
      'sluice_learnt_limit',
      'gauge',
      "The limit an adaptive queue's level has learnt from its endpoint (AIMD), the queue's own (key=\"\") or a key's; the claim applies it when lower than the configured one.",
      read.learnt.flatMap((l) =>
        l.effective === null || !limits.get(l.queue)?.adaptive.value
          ? []
          : [sample('sluice_learnt_limit', { queue: l.queue, key: l.key ?? '' }, l.effective)],
      ),
    ),
    ...family(
      'sluice_level_held',
      'gauge',
      'Levels held now by a Retry-After (1), the queue\'s own (key="") or a key\'s: none of their tasks is pushed until it ends.',
      read.learnt.flatMap((l) => (l.held ? [sample('sluice_level_held', { queue: l.queue, key: l.key ?? '' }, 1)] : [])),
    ),
    ...family(
      'sluice_endpoint_state',
      'gauge',
      'Endpoint origins by state: 0 healthy, 1 probing (paused, its one probe out), 2 paused (its tasks wait, using no attempt); for SLUICE_METRICS_TOP_ENDPOINTS origins, those not healthy first, then those with the most failures.',
      read.endpoints.map((e) => sample('sluice_endpoint_state', { origin: e.origin }, ENDPOINT_STATE_VALUES[e.state])),
    ),
    ...family(
      'sluice_endpoint_failures_total',
      'counter',
      'Failed pushes per endpoint origin (no connection, no answer in time, a 5xx but a 503 with Retry-After) since Sluice began to track it: an origin not paused that no push reached for an hour is forgotten, and counts from 0 again. The origins of sluice_endpoint_state.',
      read.endpoints.map((e) => sample('sluice_endpoint_failures_total', { origin: e.origin }, e.failures)),
    ),
  ];
  for (const [id, def] of Object.entries(COUNTED)) {
    lines.push(
      ...counted(
        def,
        read.counters.filter((r) => r.metric === id),
        queues,
      ),
    );
  }
  return `${lines.join('\n')}\n`;
}
