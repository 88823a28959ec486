/** `sluice status [QUEUE]`: queues at a glance; one queue with its settings and who holds its slots. */
import type { ConcurrencyView, LearningLevelView, QueueView, SlotView } from '../../protocol/wire-queues.ts';
import { type Command, seg } from '../context.ts';
import { type Cell, sourced, span, table, time } from '../output.ts';
import { type RateInUse, type RateSetting, rateSetting, rateUse } from '../rates.ts';
import { readSucceeded, type Succeeded } from '../succeeded.ts';

export const status: Command = {
  words: ['status'],
  args: [{ name: 'QUEUE', optional: true }],
  flags: [],
  summary: 'queues: counts, limits and their source, paused; one queue: its slots',
  details: [
    'Every queue with its task counts, effective limits (and where each comes from) and paused state.',
    'With QUEUE: that queue in full, and its slots: per level (cluster, queue, each key) the limit,',
    "how many are leased and how much of its rate recent claims used, and each slot's holder (task,",
    'lease, how long held, when it expires).',
    'Uses GET /v1/queues, or GET /v1/queues/QUEUE and /v1/queues/QUEUE/concurrency (tasks:read).',
    'Succeeded tasks are counted now and then by a dispatcher, not live: they come from GET /metrics',
    '(sluice_tasks), which needs a key with metrics:read or admin; without one they show as "-".',
  ].join('\n'),
  async run({ api, out }, { args }) {
    if (args.QUEUE === undefined) {
      const [data, succeeded] = await Promise.all([api.get<{ queues: RatedQueue[] }>('/v1/queues'), readSucceeded(api)]);
      const queues = data.queues.map((q) => withSucceeded(q, succeeded));
      out.result({ queues, succeeded_counted_at: countedAt(succeeded) }, () =>
        queues.length ? `${queuesTable(queues)}\n${succeededNote(succeeded)}` : 'no queues yet',
      );
      if ('unknown' in succeeded) out.note(`sluice: ${succeeded.unknown}`);
      return;
    }
    const q = seg(args.QUEUE);
    const [view, concurrency, succeeded] = await Promise.all([
      api.get<RatedQueue>(`/v1/queues/${q}`),
      api.get<RatedConcurrency>(`/v1/queues/${q}/concurrency`),
      readSucceeded(api),
    ]);
    const queue = withSucceeded(view, succeeded);
    out.result({ queue, concurrency, succeeded_counted_at: countedAt(succeeded) }, () =>
      [queueReport(queue), succeededNote(succeeded), '', slotsReport(concurrency, Date.now())].join('\n'),
    );
    if ('unknown' in succeeded) out.note(`sluice: ${succeeded.unknown}`);
  },
};

/** A queue view with its rates, whose counts also hold `succeeded`: a number, or null when it cannot be known. */
type CountedQueue = RatedQueue & { counts: QueueView['counts'] & { succeeded: number | null } };
type RatedQueue = QueueView & { rate?: RateSetting; key_rate?: RateSetting };
type RatedConcurrency = Omit<ConcurrencyView, 'queue_level' | 'keys'> & {
  queue_level: ConcurrencyView['queue_level'] & { rate?: RateInUse };
  keys: Array<ConcurrencyView['keys'][number] & { rate?: RateInUse }>;
};

function withSucceeded(q: RatedQueue, succeeded: Succeeded): CountedQueue {
  const n = 'counts' in succeeded && succeeded.counts.countedAt !== null ? (succeeded.counts.byQueue.get(q.name) ?? 0) : null;
  return { ...q, counts: { ...q.counts, succeeded: n } };
}

function countedAt(succeeded: Succeeded): string | null {
  return 'counts' in succeeded ? (succeeded.counts.countedAt?.toISOString() ?? null) : null;
}

function succeededNote(succeeded: Succeeded): string {
  if (!('counts' in succeeded)) return 'succeeded: not known (see stderr)';
  const at = succeeded.counts.countedAt;
  return at === null
    ? 'succeeded: not counted yet (a dispatcher counts every 15 s on Node, every minute on the Worker)'
    : `succeeded: within the retention window, as counted ${span(Date.now() - at.getTime())} ago`;
}

function queuesTable(queues: CountedQueue[]): string {
  return table(
    [
      'QUEUE',
      'PENDING',
      'LEASED',
      'WAITING',
      'DEAD',
      'SUCCEEDED',
      'CONCURRENCY',
      'KEY CONCURRENCY',
      'RATE',
      'KEY RATE',
      'PRIORITY',
      'PAUSED',
    ],
    queues.map((q) => [
      q.name,
      q.counts.pending,
      q.counts.leased,
      q.counts.waiting,
      q.counts.dead,
      q.counts.succeeded,
      sourced(q.concurrency),
      sourced(q.key_concurrency),
      rateSetting(q.rate),
      rateSetting(q.key_rate),
      sourced(q.priority),
      sourced(q.paused),
    ]),
  );
}

/** A queue's settings, as `status QUEUE` and the commands that change them print it. */
export function queueReport(q: RatedQueue | CountedQueue): string {
  const done = (q as Partial<CountedQueue>).counts?.succeeded ?? null;
  const rows: Array<[string, string]> = [
    [
      'tasks',
      `${q.counts.pending} pending, ${q.counts.leased} leased, ${q.counts.waiting} waiting, ${q.counts.dead} dead${done === null ? '' : `, ${done} succeeded`}`,
    ],
    ['concurrency', sourced(q.concurrency)],
    ['key concurrency', sourced(q.key_concurrency)],
    ['rate', rateSetting(q.rate)],
    ['key rate', rateSetting(q.key_rate)],
    ['priority', sourced(q.priority)],
    ['paused', sourced(q.paused)],
    ['adaptive', sourced(q.adaptive)],
    ['adaptive min', sourced(q.adaptive_min)],
    ['pulled', sourced(q.pull)],
    ['key strategy', sourced(q.key_strategy)],
    ['key from', q.key_from ?? '-'],
    ['default url', q.url ?? '-'],
    ['task defaults', `max_attempts ${q.max_attempts}, lease ${span(q.lease_ms)}, timeout ${span(q.timeout_ms)}`],
  ];
  return `queue ${q.name}\n${table(['SETTING', 'VALUE'], rows)}`;
}

const keyName = (key: string) => (key === '' ? '""' : key);
const limit = (level: { limit: number | null; source: string }) => sourced({ value: level.limit, source: level.source });

/** What a level learnt from its endpoint: the limit in force when lower, a hold, and why. */
function learnt(level: LearningLevelView, now: number): string | null {
  const parts = [
    level.effective !== null && level.effective !== level.limit ? `${level.effective}` : null,
    level.held_until && Date.parse(level.held_until) > now ? `held ${span(Date.parse(level.held_until) - now)}` : null,
  ].filter((p) => p !== null);
  if (parts.length === 0) return null;
  return `${parts.join(', ')}${level.last_move ? ` (${level.last_move.reason})` : ''}`;
}

function slotsReport(c: RatedConcurrency, now: number): string {
  const levels: Cell[][] = [
    ['cluster', null, limit(c.cluster), null, c.cluster.active, null],
    ['queue', null, limit(c.queue_level), learnt(c.queue_level, now), c.queue_level.active, rateUse(c.queue_level.rate)],
    ...c.keys.map((k): Cell[] => ['key', keyName(k.key), limit(k), learnt(k, now), k.active, rateUse(k.rate)]),
    ['no key', null, null, null, c.keyless.active, null],
  ];
  const holders = [
    ...c.keys.flatMap((k) => k.slots.map((s) => [keyName(k.key), s] as const)),
    ...c.keyless.slots.map((s) => [null, s] as const),
  ];
  const holderRows = holders.map(([key, s]: readonly [string | null, SlotView]): Cell[] => [
    s.task_id,
    key,
    s.lease_id,
    time(s.leased_at),
    span(now - Date.parse(s.leased_at)),
    span(Date.parse(s.expires_at) - now),
  ]);
  const paused = c.queue_level.paused ? ' (paused: nothing new is claimed)' : '';
  const adaptive = c.adaptive ? ' (adaptive: its limits learn from the endpoint)' : '';
  const strategy = c.key_strategy.value === 'queue' ? '' : ` (key strategy ${c.key_strategy.value})`;
  return [
    `slots of queue ${c.queue}${paused}${adaptive}${strategy}`,
    table(['LEVEL', 'KEY', 'LIMIT', 'LEARNT', 'LEASED', 'RATE USED'], levels),
    '',
    holders.length ? table(['TASK', 'KEY', 'LEASE', 'LEASED AT', 'HELD', 'EXPIRES IN'], holderRows) : 'no slot is held',
  ].join('\n');
}
