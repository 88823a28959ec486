/** The queues page: every queue's counts, its limits in force with their sources, and its state. */
import { html } from 'hono/html';
import type { QueueView } from '../../queue-ops.ts';
import { duration, href, limitText } from '../format.ts';

function rateText(rate: QueueView['rate']) {
  return rate.value === null
    ? html`<span class="muted">none</span>`
    : html`${rate.value.limit} per ${duration(rate.value.period_ms)} <span class="source">${rate.source}</span>`;
}

export interface SucceededCounts {
  /** Succeeded tasks per queue, as last counted (`sluice.task_counts`). */
  byQueue: Map<string, number>;
  countedAt: Date | null;
}

export function queuesView(
  queues: readonly QueueView[],
  succeeded: SucceededCounts,
  clusterCap: number | null,
  retentionMs: number | null,
  now: Date,
) {
  const counted = succeeded.countedAt ? `counted ${duration(now.getTime() - succeeded.countedAt.getTime())} ago` : 'not counted yet';
  const rows = queues.map(
    (q) => html`<tr data-queue="${q.name}">
<td><a href="${href(`/queues/${encodeURIComponent(q.name)}`)}"><b>${q.name}</b></a></td>
<td class="n"><a href="${href('/tasks', { queue: q.name, status: 'pending' })}">${q.counts.pending}</a></td>
<td class="n"><a href="${href(`/queues/${encodeURIComponent(q.name)}`)}">${q.counts.leased}</a></td>
<td class="n"><a href="${href('/dead', { queue: q.name })}">${q.counts.dead}</a></td>
<td class="n">${succeeded.byQueue.get(q.name) ?? 0}</td>
<td>${limitText(q.concurrency.value, q.concurrency.source)}</td>
<td>${limitText(q.key_concurrency.value, q.key_concurrency.source)}</td>
<td>${rateText(q.rate)} / ${rateText(q.key_rate)}</td>
<td>${q.priority.value} <span class="source">${q.priority.source}</span></td>
<td>${q.paused.value ? html`<span class="badge paused">paused</span> <span class="source">${q.paused.source}</span>` : html`<span class="muted">running</span>`}${q.pull.value ? html` <span class="badge">pulled</span>` : ''}</td>
<td><a href="${href(`/confirm/${q.paused.value ? 'resume' : 'pause'}`, { queue: q.name })}">${q.paused.value ? 'Resume…' : 'Pause…'}</a></td>
</tr>`,
  );
  return html`<h1>Queues</h1>
<p class="muted">Cluster cap: ${clusterCap === null ? 'none' : html`<b>${clusterCap}</b> <span class="source">env</span>`}.
Sources: <span class="source">override</span> set at run time (API or here), <span class="source">env</span> from <code>SLUICE_QUEUES</code>, <span class="source">default</span> none given.</p>
<table><thead><tr><th>Queue</th><th class="n">Pending</th><th class="n">Leased</th><th class="n">Dead</th><th class="n">Succeeded¹</th>
<th>Concurrency</th><th>Key concurrency</th><th>Rate: queue / key</th><th>Priority</th><th>State</th><th></th></tr></thead>
<tbody>${rows.length ? rows : html`<tr><td colspan="11" class="muted">No queues yet: enqueue a task.</td></tr>`}</tbody></table>
<p class="muted">¹ Within the retention window (${retentionMs === null ? 'kept for ever' : duration(retentionMs)}), ${counted}: a dispatcher counts every 15 s on Node, every minute on the Worker. Pending, leased and dead are counted now.</p>`;
}
