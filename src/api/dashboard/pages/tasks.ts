/** Task pages: the filtered list, the dead letters with their redrives, and one task with every attempt. */
import { html } from 'hono/html';
import { parseTraceparent, TRACEPARENT } from '../../../core/trace.ts';
import { FINAL_STATUSES, TASK_STATUSES, type Task } from '../../../core/types.ts';
import type { AttemptRecord } from '../../../db/leases.ts';
import { duration, href, taskLink, time } from '../format.ts';

export interface TaskFilters {
  queue?: string | undefined;
  status?: string | undefined;
  concurrency_key?: string | undefined;
}

function badge(status: string) {
  return html`<span class="badge ${status}">${status}</span>`;
}

function clip(text: string | null, chars = 120) {
  if (text === null) return html`<span class="muted">—</span>`;
  return text.length > chars ? html`<span title="${text}">${text.slice(0, chars)}…</span>` : text;
}

function filterForm(action: string, f: TaskFilters, queues: readonly string[], withStatus: boolean) {
  return html`<form class="filters" method="get" action="${action}">
<label>Queue <input name="queue" list="queue-names" value="${f.queue ?? ''}" maxlength="128"></label>
<datalist id="queue-names">${queues.map((q) => html`<option value="${q}"></option>`)}</datalist>
${
  withStatus
    ? html`<label>Status <select name="status"><option value="">any</option>${TASK_STATUSES.map(
        (s) => html`<option value="${s}"${s === f.status ? ' selected' : ''}>${s}</option>`,
      )}</select></label>`
    : ''
}
<label>Key <input name="concurrency_key" value="${f.concurrency_key ?? ''}" maxlength="256"></label>
<button type="submit">Filter</button> <a href="${action}">clear</a></form>`;
}

function pager(path: string, f: TaskFilters, nextCursor: string | null) {
  return nextCursor ? html`<p><a rel="next" href="${href(path, { ...f, cursor: nextCursor })}">Older →</a></p>` : '';
}

export function taskListView(tasks: readonly Task[], f: TaskFilters, queues: readonly string[], nextCursor: string | null) {
  return html`<h1>Tasks</h1>${filterForm('/dashboard/tasks', f, queues, true)}
<table><thead><tr><th>Task</th><th>Queue</th><th>Status</th><th>Key</th><th class="n">Attempts</th><th>Run at</th><th>Last error</th></tr></thead>
<tbody>${
    tasks.length
      ? tasks.map(
          (t) => html`<tr data-task="${t.id}"><td>${taskLink(t.id)}</td><td>${t.queue}</td><td>${badge(t.status)}</td>
<td>${t.concurrencyKey === null ? html`<span class="muted">—</span>` : html`<code>${t.concurrencyKey}</code>`}</td>
<td class="n">${t.attempts} / ${t.maxAttempts}</td><td>${time(t.runAt)}</td><td>${clip(t.lastError)}</td></tr>`,
        )
      : html`<tr><td colspan="7" class="muted">No tasks match.</td></tr>`
  }</tbody></table>${pager('/tasks', f, nextCursor)}`;
}

export function deadView(
  tasks: readonly Task[],
  f: TaskFilters,
  queues: readonly string[],
  nextCursor: string | null,
  matching: number,
  cap: number,
) {
  const all = { queue: f.queue, concurrency_key: f.concurrency_key };
  return html`<h1>Dead letters</h1>${filterForm('/dashboard/dead', f, queues, false)}
<div class="panel actions"><span><b>${matching >= cap ? `${cap}+` : matching}</b> dead task${matching === 1 ? '' : 's'} match.</span>
${matching > 0 ? html`<a href="${href('/confirm/redrive-all', all)}">Redrive all matching…</a>` : ''}</div>
<table><thead><tr><th>Task</th><th>Queue</th><th>Key</th><th class="n">Attempts</th><th>Died</th><th>Last error</th><th></th></tr></thead>
<tbody>${
    tasks.length
      ? tasks.map(
          (t) => html`<tr data-task="${t.id}"><td>${taskLink(t.id)}</td><td>${t.queue}</td>
<td>${t.concurrencyKey === null ? html`<span class="muted">—</span>` : html`<code>${t.concurrencyKey}</code>`}</td>
<td class="n">${t.attempts} / ${t.maxAttempts}</td><td>${time(t.finishedAt)}</td><td>${clip(t.lastError)}</td>
<td><a href="${href('/confirm/redrive', { id: t.id })}">Redrive…</a></td></tr>`,
        )
      : html`<tr><td colspan="7" class="muted">No dead tasks match.</td></tr>`
  }</tbody></table>${pager('/dead', all, nextCursor)}`;
}

/** The body as text, indented when it is JSON; always escaped, never rendered. */
function bodyText(task: Task): string | null {
  if (task.body === null || task.contentType !== 'application/json') return task.body;
  try {
    return JSON.stringify(JSON.parse(task.body), null, 2);
  } catch {
    return task.body;
  }
}

export function taskPage(t: Task, attempts: readonly AttemptRecord[], now: Date) {
  const actions = [
    t.status === 'dead' ? html`<a href="${href('/confirm/redrive', { id: t.id })}">Redrive…</a>` : '',
    (FINAL_STATUSES as readonly string[]).includes(t.status) ? '' : html`<a href="${href('/confirm/cancel', { id: t.id })}">Cancel…</a>`,
    t.lease ? html`<a href="${href('/confirm/release', { queue: t.queue, lease: t.lease.id })}">Force release its lease…</a>` : '',
  ];
  const body = bodyText(t);
  return html`<h1>Task #${t.id} ${badge(t.status)}${t.cancelRequestedAt ? html` <span class="badge">cancel requested</span>` : ''}</h1>
<div class="actions">${actions}</div>
<div class="panel"><dl>
<dt>Queue</dt><dd><a href="${href(`/queues/${encodeURIComponent(t.queue)}`)}">${t.queue}</a></dd>
<dt>Key</dt><dd>${t.concurrencyKey === null ? html`<span class="muted">none</span>` : html`<code>${t.concurrencyKey}</code>${t.concurrencyLimit === null ? '' : html` (limit given: ${t.concurrencyLimit})`}`}</dd>
<dt>Target</dt><dd>${t.url === null ? html`<span class="muted">none: pulled by its queue's consumers</span>` : html`<code>${t.method} ${t.url}</code>`}</dd>
<dt>Attempts</dt><dd>${t.attempts} of ${t.maxAttempts}${t.deferrals ? `, ${t.deferrals} deferrals` : ''}</dd>
<dt>Priority</dt><dd>${t.priority}</dd>
<dt>Run at</dt><dd>${time(t.runAt)}</dd>
<dt>Expires</dt><dd>${time(t.expiresAt)}</dd>
<dt>Lease</dt><dd>${t.lease ? html`<code>${t.lease.id}</code>, held ${duration(now.getTime() - t.lease.leasedAt.getTime())}, until ${time(t.lease.expiresAt)}` : html`<span class="muted">none</span>`}</dd>
<dt>Timeout / lease</dt><dd>${duration(t.timeoutMs)} / ${duration(t.leaseMs)}</dd>
<dt>Dedup key</dt><dd>${t.dedupKey ?? html`<span class="muted">none</span>`}${t.dedupTtlMs === null ? '' : html` <span class="muted">(kept ${duration(t.dedupTtlMs)} after it finishes${t.finishedAt === null ? '' : html`, until ${time(new Date(t.finishedAt.getTime() + t.dedupTtlMs))}`})</span>`}</dd>
<dt>Trace</dt><dd>${traceId(t) === null ? html`<span class="muted">none</span>` : html`<code>${traceId(t)}</code> <span class="muted">(each attempt a span: its lease id's first 16 hex digits)</span>`}</dd>
<dt>Callbacks</dt><dd>${
    t.callbackUrl === null && t.failureCallbackUrl === null
      ? html`<span class="muted">none</span>`
      : html`${t.callbackUrl === null ? '' : html`on success <code>${t.callbackUrl}</code> `}${t.failureCallbackUrl === null ? '' : html`on death <code>${t.failureCallbackUrl}</code>`}`
  }</dd>
<dt>Created</dt><dd>${time(t.createdAt)}</dd>
<dt>Finished</dt><dd>${time(t.finishedAt)}</dd>
<dt>${t.status === 'succeeded' ? 'Error before it succeeded' : 'Last error'}</dt><dd>${t.lastError ?? html`<span class="muted">none</span>`}</dd>
<dt>Last HTTP status</dt><dd>${t.lastStatus ?? html`<span class="muted">none</span>`}</dd>
<dt>Header names</dt><dd>${Object.keys(t.headers).length ? Object.keys(t.headers).join(', ') : html`<span class="muted">none</span>`} <span class="muted">(values are never shown: they may be credentials)</span></dd>
</dl></div>
<h2>Body <span class="muted">${t.contentType}</span></h2>${body === null ? html`<p class="muted">No body.</p>` : html`<pre>${body}</pre>`}
<h2>Result</h2>${t.result === null ? html`<p class="muted">None.</p>` : html`<pre>${t.result}</pre>`}
<h2>Attempts</h2>
<table><thead><tr><th class="n">#</th><th>Outcome</th><th class="n">HTTP</th><th class="n">Duration</th><th>Started</th><th>Ended</th><th>Error</th></tr></thead>
<tbody>${
    attempts.length
      ? attempts.map(
          (
            a,
          ) => html`<tr data-lease="${a.leaseId}"><td class="n">${a.attempt}</td><td>${badge(a.outcome)}</td><td class="n">${a.httpStatus ?? '—'}</td>
<td class="n">${a.durationMs === null ? '—' : duration(a.durationMs)}</td><td>${time(a.startedAt)}</td><td>${time(a.endedAt)}</td><td>${clip(a.error, 300)}</td></tr>`,
        )
      : html`<tr><td colspan="7" class="muted">No attempt has ended yet.</td></tr>`
  }</tbody></table>`;
}

/** The trace id a task runs in (src/core/trace.ts), if it was enqueued in one. */
function traceId(t: Task): string | null {
  const value = t.headers[TRACEPARENT];
  return value === undefined ? null : (parseTraceparent(value)?.traceId ?? null);
}
