/**
 * Waiting time per queue, from the `sluice_due_to_push_seconds` histogram dispatchers keep in
 * Postgres: how long tasks waited from their due time to their first push (for a slot and a
 * dispatcher), with quantiles estimated from the buckets, and what held claims back.
 */
import { html } from 'hono/html';
import { COUNTED, SECONDS_BUCKETS } from '../../../core/metrics.ts';
import type { CounterRow } from '../../../db/metrics.ts';
import { duration, href } from '../format.ts';
import { type Quantile, quantile } from '../quantiles.ts';

const LABELS = [...SECONDS_BUCKETS.map(String), '+Inf'];
const HELD_BACK = ['cluster', 'queue', 'key', 'paused'] as const;

export interface QueueWaiting {
  queue: string;
  /** Observations per bucket, in `SECONDS_BUCKETS` order, then above the last. */
  buckets: number[];
  count: number;
  sum: number;
  acquired: number;
  heldBack: Record<(typeof HELD_BACK)[number], number>;
}

/** Per queue, from the stored counter rows (per-bucket counts, `sum` and `count`). */
export function waitingByQueue(rows: readonly CounterRow[]): QueueWaiting[] {
  const queues = new Map<string, QueueWaiting>();
  const of = (queue: string) => {
    let w = queues.get(queue);
    if (!w) {
      w = { queue, buckets: LABELS.map(() => 0), count: 0, sum: 0, acquired: 0, heldBack: { cluster: 0, queue: 0, key: 0, paused: 0 } };
      queues.set(queue, w);
    }
    return w;
  };
  for (const r of rows) {
    if (r.metric === 'due_to_push') {
      const w = of(r.queue);
      if (r.label === 'count') w.count += r.value;
      else if (r.label === 'sum') w.sum += r.value;
      else if (LABELS.includes(r.label)) w.buckets[LABELS.indexOf(r.label)]! += r.value;
    } else if (r.metric === 'acquired') of(r.queue).acquired += r.value;
    else if (r.metric === 'held_back' && (HELD_BACK as readonly string[]).includes(r.label))
      of(r.queue).heldBack[r.label as (typeof HELD_BACK)[number]] += r.value;
  }
  return [...queues.values()].sort((a, b) => a.queue.localeCompare(b.queue));
}

function seconds(q: Quantile | null) {
  if (q === null) return html`<span class="muted">—</span>`;
  return q.atLeast ? `> ${duration(q.seconds * 1000)}` : duration(q.seconds * 1000);
}

/** The buckets as columns (heights by share of the queue's observations). */
function histogram(w: QueueWaiting) {
  const max = Math.max(...w.buckets, 1);
  const width = 12;
  return html`<svg class="bar" width="${LABELS.length * width}" height="30" viewBox="0 0 ${LABELS.length * width} 30" role="img"
aria-label="waiting time of ${w.queue} by bucket">${w.buckets.map((n, i) => {
    const h = n === 0 ? 0 : Math.max(2, Math.round((n / max) * 30));
    return html`<rect class="held" x="${i * width}" y="${30 - h}" width="${width - 2}" height="${h}"><title>≤ ${LABELS[i]} s: ${n}</title></rect>`;
  })}</svg>`;
}

export function waitingView(waiting: readonly QueueWaiting[]) {
  const bounds = [...SECONDS_BUCKETS];
  return html`<h1>Waiting time</h1>
<p class="muted">From a task's due time to its first push: the wait for a slot and a dispatcher (<code>${COUNTED.due_to_push.name}</code>).
Counted since the counters began (they only rise); quantiles are estimated from the buckets (${SECONDS_BUCKETS[0]} s to ${SECONDS_BUCKETS.at(-1)} s) by linear interpolation, as Prometheus's <code>histogram_quantile</code> does.
Dispatchers write their counts at most once a second on Node, once per run on the Worker.</p>
<table><thead><tr><th>Queue</th><th class="n">Pushed</th><th class="n">p50</th><th class="n">p90</th><th class="n">p99</th><th class="n">Mean</th><th>Distribution</th>
<th class="n">Acquired</th><th class="n" title="claim passes that found tasks due and could lease none, by what stopped them">Held back: cluster / queue / key / paused</th></tr></thead>
<tbody>${
    waiting.length
      ? waiting.map(
          (w) => html`<tr data-queue="${w.queue}"><td><a href="${href(`/queues/${encodeURIComponent(w.queue)}`)}">${w.queue}</a></td>
<td class="n">${w.count}</td><td class="n">${seconds(quantile(0.5, bounds, w.buckets))}</td><td class="n">${seconds(quantile(0.9, bounds, w.buckets))}</td>
<td class="n">${seconds(quantile(0.99, bounds, w.buckets))}</td><td class="n">${w.count ? duration((w.sum / w.count) * 1000) : '—'}</td>
<td>${histogram(w)}</td><td class="n">${w.acquired}</td>
<td class="n">${w.heldBack.cluster} / ${w.heldBack.queue} / ${w.heldBack.key} / ${w.heldBack.paused}</td></tr>`,
        )
      : html`<tr><td colspan="9" class="muted">Nothing counted yet: no task has been pushed.</td></tr>`
  }</tbody></table>`;
}
