/**
 * The metrics Sluice exposes at GET /metrics (Prometheus text format), in one list: the
 * dispatcher counts under these ids (dispatcher/meter.ts), Postgres keeps the sums
 * (`sluice.counters`), and the scrape names them (api/prometheus.ts).
 */

export type MetricType = 'counter' | 'gauge' | 'histogram';

export interface MetricDefinition {
  name: string;
  type: MetricType;
  help: string;
  /** The label a stored row's `label` column fills, if any (`queue` is implied when per queue). */
  label?: string;
  /**
   * Every value that label takes. A scrape writes a series for each, zero until counted, so that
   * `rate()` and `absent()` see a series from the start (per known queue when per queue).
   */
  values?: readonly string[];
  perQueue: boolean;
}

/** Counters and histograms written by dispatchers, by the id stored in `sluice.counters.metric`. */
export const COUNTED = {
  acquired: {
    name: 'sluice_acquired_total',
    type: 'counter',
    help: 'Tasks leased by claim passes: each acquisition takes a slot at every level.',
    perQueue: true,
  },
  held_back: {
    name: 'sluice_held_back_total',
    type: 'counter',
    help: 'Claim passes that found tasks due in a queue and could lease none of them, by what stopped them: cluster, queue (its concurrency, or its learnt limit when adaptive), rate (its rate), key (every due key at its concurrency, learnt limit, rate or hold), paused, held (a Retry-After holds the queue).',
    label: 'limit',
    values: ['cluster', 'queue', 'rate', 'key', 'paused', 'held'],
    perQueue: true,
  },
  due_to_push: {
    name: 'sluice_due_to_push_seconds',
    type: 'histogram',
    help: "Time from a task's due time to its first push: how long it waited for a slot and a dispatcher.",
    perQueue: true,
  },
  push_duration: {
    name: 'sluice_push_duration_seconds',
    type: 'histogram',
    help: 'Time from sending a push to its answer (or its timeout).',
    perQueue: true,
  },
  pushes: {
    name: 'sluice_pushes_total',
    type: 'counter',
    help: 'Pushes by outcome: succeeded, retried, deferred, dead, lease_kept (the endpoint holds the lease), unanswered (timed out or cut; the slot stays held), lost (the lease ended meanwhile).',
    label: 'outcome',
    values: ['succeeded', 'retried', 'deferred', 'dead', 'lease_kept', 'unanswered', 'lost'],
    perQueue: true,
  },
  overloads: {
    name: 'sluice_overloads_total',
    type: 'counter',
    help: "Answers that say the endpoint is over its capacity, by signal: http_429 and http_503 (no Retry-After; an adaptive queue lowers the level's limit to 85%), refused (the connection), unanswered (a timeout or a connection lost; the lease stays held, and an adaptive queue's level is lowered too), retry_after (a 429 or 503 with Retry-After: the level is held until then).",
    label: 'signal',
    values: ['http_429', 'http_503', 'refused', 'unanswered', 'retry_after'],
    perQueue: true,
  },
  lease_expiries: {
    name: 'sluice_lease_expiries_total',
    type: 'counter',
    help: 'Leases that ran out without being ended, settled by the reaper as timed-out attempts.',
    perQueue: true,
  },
  claim_passes: {
    name: 'sluice_claim_passes_total',
    type: 'counter',
    help: 'Claim passes made by dispatchers (one round trip each).',
    perQueue: false,
  },
  dispatch_runs: {
    name: 'sluice_dispatch_runs_total',
    type: 'counter',
    help: 'Dispatcher runs (reap, claim and push until nothing is claimable or the budget is spent).',
    perQueue: false,
  },
} as const satisfies Record<string, MetricDefinition>;

export type CountedId = keyof typeof COUNTED;

/** Histogram bucket upper bounds, in seconds (the last bucket, +Inf, is implied). */
export const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300] as const;

/** The stored label of the bucket a value falls in: its upper bound, or `+Inf`. */
export function bucketOf(seconds: number): string {
  const le = SECONDS_BUCKETS.find((b) => seconds <= b);
  return le === undefined ? '+Inf' : String(le);
}
