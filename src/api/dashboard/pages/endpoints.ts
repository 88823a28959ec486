/**
 * The endpoints page: each origin Sluice pushes to with its health, a pause or resume by hand,
 * and the replay form (POST /v1/tasks/redrive), whose confirmation counts the matches first.
 */
import { html } from 'hono/html';
import type { EndpointHealthRow } from '../../../db/endpoints.ts';
import { href, time } from '../format.ts';

function stateCell(e: EndpointHealthRow) {
  if (e.state === 'healthy') return html`<span class="muted">healthy</span>`;
  const by = e.pausedBy === 'hand' ? ' by hand' : '';
  return html`<span class="badge ${e.state === 'paused' ? 'paused' : 'pending'}">${e.state}${by}</span>`;
}

/** Until when its tasks wait, and why. */
function untilCell(e: EndpointHealthRow) {
  const held = e.heldUntil ? html`held by a Retry-After until ${time(e.heldUntil)}` : '';
  if (e.state === 'healthy') return held || html`<span class="muted">—</span>`;
  const paused =
    e.pausedBy === 'hand'
      ? html`until resumed`
      : e.state === 'probing'
        ? html`probe out, its lease ends ${time(e.pausedUntil)}`
        : html`next probe at ${time(e.pausedUntil)}`;
  return held ? html`${paused}; ${held}` : paused;
}

function lastError(e: EndpointHealthRow) {
  if (e.lastError === null) return html`<span class="muted">—</span>`;
  const text = e.lastError.length > 120 ? html`<span title="${e.lastError}">${e.lastError.slice(0, 120)}…</span>` : e.lastError;
  return html`${text} <span class="muted">(${time(e.lastErrorAt)})</span>`;
}

function actions(e: EndpointHealthRow) {
  const origin = { origin: e.origin };
  return html`${e.pausedBy === 'hand' ? '' : html`<a href="${href('/confirm/endpoint-pause', origin)}">Pause…</a> `}${
    e.state !== 'healthy' || e.heldUntil ? html`<a href="${href('/confirm/endpoint-resume', origin)}">Resume…</a> ` : ''
  }<a href="${href('/confirm/redrive-matching', { url_prefix: `${e.origin}/` })}">Redrive its dead…</a>`;
}

/** Origins not healthy first, then those failing most: what an operator looks for. */
export function worstFirst(endpoints: readonly EndpointHealthRow[]): EndpointHealthRow[] {
  const rank = (e: EndpointHealthRow) => (e.state === 'healthy' ? (e.heldUntil ? 1 : 2) : 0);
  return [...endpoints].sort(
    (a, b) =>
      rank(a) - rank(b) || b.failures5m - a.failures5m || b.consecutiveFailures - a.consecutiveFailures || a.origin.localeCompare(b.origin),
  );
}

export function endpointsView(endpoints: readonly EndpointHealthRow[], total: number, queues: readonly string[]) {
  const rows = endpoints.map(
    (e) => html`<tr data-origin="${e.origin}">
<td><code>${e.origin}</code></td>
<td>${stateCell(e)}</td>
<td class="n">${e.consecutiveFailures}</td>
<td class="n">${e.attempts5m}</td>
<td class="n">${e.failures5m}</td>
<td>${lastError(e)}</td>
<td>${untilCell(e)}</td>
<td>${actions(e)}</td>
</tr>`,
  );
  return html`<h1>Endpoints</h1>
<p class="muted">Each origin (scheme, host and port) pushed to lately. An origin that fails <code>SLUICE_ENDPOINT_PAUSE_AFTER</code> times in a row
(no connection, no answer in time, a 5xx) is paused: its tasks wait, using no attempt, and one probe goes after a backoff (5 s, doubling to 5 min);
a 2xx resumes it. A 429 or 503 with <code>Retry-After</code> holds it until then.</p>
<table><thead><tr><th>Origin</th><th>State</th><th class="n">Failures in a row</th><th class="n">Attempts 5 min</th><th class="n">Failures 5 min</th>
<th>Last error</th><th>Waits until</th><th></th></tr></thead>
<tbody>${rows.length ? rows : html`<tr><td colspan="8" class="muted">No origin pushed to lately.</td></tr>`}</tbody></table>
${total > endpoints.length ? html`<p class="muted">The first ${endpoints.length} of ${total}, those not healthy first; <code>sluice endpoints</code> lists them all.</p>` : ''}
<h2>Replay dead tasks</h2>
<p class="muted">Redrive the dead tasks that match, as <code>POST /v1/tasks/redrive</code> does. The next page counts them first; nothing is redriven until you confirm.
A URL prefix of an origin should end with <code>/</code>: <code>https://a.example</code> also matches <code>https://a.example.com/…</code>.</p>
<form class="filters" method="get" action="/dashboard/confirm/redrive-matching">
<label>Queue <input name="queue" list="queue-names" maxlength="128"></label>
<datalist id="queue-names">${queues.map((q) => html`<option value="${q}"></option>`)}</datalist>
<label>URL prefix <input name="url_prefix" maxlength="2048" placeholder="https://example.com/"></label>
<label>Dead since <input name="since" maxlength="40" placeholder="2026-11-29T06:00:00Z"></label>
<label>Dead before <input name="until" maxlength="40" placeholder="2026-11-29T07:00:00Z"></label>
<button type="submit">Count…</button></form>`;
}
