/** The endpoint groups page: each group's URLs, which a task naming the group fans out to. */
import { html } from 'hono/html';
import type { Group } from '../../../db/groups.ts';
import { time } from '../format.ts';

export function groupsView(groups: readonly Group[], more: boolean) {
  const rows = groups.map(
    (g) => html`<tr data-group="${g.name}">
<td><b>${g.name}</b></td>
<td>${g.urls.map((u, i) => html`${i === 0 ? '' : html`<br>`}<code>${u}</code>`)}</td>
<td class="n">${g.urls.length}</td>
<td>${time(g.updatedAt)}</td>
</tr>`,
  );
  return html`<h1>Endpoint groups</h1>
<p class="muted">A task enqueued with <code>"group": "NAME"</code> instead of <code>url</code> becomes one task per URL of the group, all or none.
Groups are set with <code>PUT /v1/groups/NAME</code> or <code>sluice groups set NAME --urls '…'</code>, and removed with <code>DELETE</code> or <code>sluice groups delete NAME</code>.</p>
<table><thead><tr><th>Group</th><th>URLs</th><th class="n">Count</th><th>Updated</th></tr></thead>
<tbody>${rows.length ? rows : html`<tr><td colspan="4" class="muted">No groups yet.</td></tr>`}</tbody></table>
${more ? html`<p class="muted">The first ${groups.length} by name; <code>sluice groups list</code> lists them all.</p>` : ''}`;
}
