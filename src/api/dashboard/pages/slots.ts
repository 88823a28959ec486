/**
 * A queue's page: its slots as a picture, per level (cluster, queue, the keys holding the most),
 * each a bar of leased against the limit and a box per slot with its holder; refreshed live.
 * Below, the queue's limits with the forms that change them.
 */
import { html } from 'hono/html';
import type { SlotHolder } from '../../../db/queues.ts';
import type { ConcurrencyPicture, LearningLevel, QueueView, RateLevel, SlotLevel } from '../../queue-ops.ts';
import { bar, duration, href, limitText, taskLink, time } from '../format.ts';

/** Free slots drawn as boxes per key; more are summed up in one. */
const FREE_BOXES = 12;
/** Keys beyond the top ones are listed in a table, up to this many. */
const KEY_TABLE_ROWS = 200;

function holderBox(queue: string, h: SlotHolder, now: Date) {
  const left = h.expiresAt.getTime() - now.getTime();
  return html`<li class="slot held${left <= 0 ? ' expired' : ''}" data-task="${h.taskId}" data-lease="${h.leaseId}">
<b>${taskLink(h.taskId)}</b> attempt ${h.attempt}<br>
held ${duration(now.getTime() - h.leasedAt.getTime())} · ${left > 0 ? html`deadline in ${duration(left)}` : html`<b>expired ${duration(-left)} ago</b>`}<br>
<span class="muted">lease <span title="${h.leaseId}">${h.leaseId.slice(0, 8)}</span> · until ${time(h.expiresAt)}</span><br>
<a class="act" href="${href('/confirm/release', { queue, lease: h.leaseId })}">Force release…</a></li>`;
}

/** Free slots up to the limit in force; those an adaptive level has learnt to leave shut, as one box. */
function freeBoxes(level: SlotLevel & Partial<Pick<LearningLevel, 'effective'>>) {
  const inForce = level.effective ?? level.limit;
  if (inForce === null) return '';
  const free = Math.max(0, inForce - level.active);
  const shut = level.limit === null ? 0 : Math.max(0, level.limit - Math.max(inForce, level.active));
  const boxes = Array.from({ length: Math.min(free, FREE_BOXES) }, () => html`<li class="slot free">free</li>`);
  return [
    boxes,
    free > FREE_BOXES ? html`<li class="slot free">+${free - FREE_BOXES} free</li>` : '',
    shut > 0 ? html`<li class="slot shut">${shut} shut: learnt from the endpoint</li>` : '',
  ];
}

/** What a level learnt from its endpoint: the limit it applies and why it last moved, and a hold. */
function learntText(level: LearningLevel, now: Date) {
  const l = level.learnt;
  const learnt =
    level.effective !== null && level.effective !== level.limit
      ? html` · learnt <b>${level.effective}</b>${l?.reason ? html` <span class="muted">(${l.reason}${l.movedAt ? html`, ${time(l.movedAt)}` : ''})</span>` : ''}`
      : '';
  const held =
    l?.heldUntil && l.heldUntil > now ? html` <span class="badge paused">held until ${time(l.heldUntil)} (Retry-After)</span>` : '';
  return [learnt, held];
}

/** A rate limit in force: the grants inside the current period against its limit. */
function rateText(rate: RateLevel) {
  if (rate.value === null) return '';
  return html` · rate <b>${rate.used}</b> / ${rate.value.limit} per ${duration(rate.value.period_ms)} <span class="source">${rate.source}</span>`;
}

function levelHead(name: unknown, level: SlotLevel, label: string, extra: unknown = '') {
  return html`<h3>${name}</h3>${bar(level.active, level.limit, label)}
<div><span class="count"><b>${level.active}</b> / ${level.limit ?? '∞'}</span> ${level.limit === null ? html`<span class="muted">no limit</span>` : html`<span class="source">${level.source}</span>`}
${level.limit !== null && level.active > level.limit ? html` <span class="badge dead">above its limit: finishing, nothing more claimed</span>` : ''}${extra}</div>`;
}

/** The live part: every level's bar and slots, on the database's clock. */
export function slotsFragment(p: ConcurrencyPicture, topKeys: number) {
  const q = encodeURIComponent(p.queue);
  const byUse = [...p.keys].sort((a, b) => b.active - a.active || a.key.localeCompare(b.key));
  const top = byUse.filter((k) => k.active > 0).slice(0, topKeys);
  const rest = byUse.filter((k) => !top.includes(k));
  const keyLevel = (k: (typeof p.keys)[number]) => html`<div class="level panel" data-key="${k.key}">
${levelHead(html`key <code>${k.key === '' ? '(empty)' : k.key}</code>`, k, `key ${k.key}`, [rateText(k.rate), learntText(k, p.now)])}
<ul class="slots">${k.holders.map((h) => holderBox(p.queue, h, p.now))}${freeBoxes(k)}</ul>
<div class="actions">${keyLimitForm(p.queue, k.key, k.limit)}${k.source === 'override' ? html`<a href="${href('/confirm/key-limit-clear', { queue: p.queue, key: k.key })}">Remove override…</a>` : ''}
<a href="${href('/tasks', { queue: p.queue, concurrency_key: k.key })}">tasks of this key</a></div></div>`;
  return html`<p class="live">Slots at ${time(p.now)} (database clock)<noscript> · <a href="${href(`/queues/${q}`)}">refresh</a></noscript></p>
<div class="level panel">${levelHead('Cluster', p.cluster, 'cluster')}</div>
<div class="level panel">${levelHead(html`Queue <code>${p.queue}</code>`, p.queueLevel, `queue ${p.queue}`, [
    rateText(p.queueLevel.rate),
    p.adaptive ? html` <span class="badge">adaptive</span>` : '',
    learntText(p.queueLevel, p.now),
    p.queueLevel.paused ? html` <span class="badge paused">paused</span>` : '',
  ])}
${p.queueLevel.effective !== p.queueLevel.limit ? html`<ul class="slots">${freeBoxes(p.queueLevel)}</ul>` : ''}
${p.keyless.length ? html`<p class="caption">Held by tasks without a key:</p><ul class="slots">${p.keyless.map((h) => holderBox(p.queue, h, p.now))}</ul>` : ''}</div>
${top.map(keyLevel)}
${
  rest.length
    ? html`<h2>Other keys <span class="muted">(${rest.length}; no slot held${top.length >= topKeys ? ` or beyond the top ${topKeys}` : ''})</span></h2>
<table><thead><tr><th>Key</th><th>Limit</th><th class="n">Leased</th><th></th></tr></thead><tbody>${rest.slice(0, KEY_TABLE_ROWS).map(
        (
          k,
        ) => html`<tr data-key="${k.key}"><td><code>${k.key}</code></td><td>${limitText(k.limit, k.source)}</td><td class="n">${k.active}</td>
<td>${keyLimitForm(p.queue, k.key, k.limit)}</td></tr>`,
      )}</tbody></table>${rest.length > KEY_TABLE_ROWS ? html`<p class="muted">…and ${rest.length - KEY_TABLE_ROWS} more.</p>` : ''}`
    : ''
}`;
}

function keyLimitForm(queue: string, key: string, limit: number | null) {
  return html`<form class="inline" method="get" action="/dashboard/confirm/key-limit"><input type="hidden" name="queue" value="${queue}">
<input type="hidden" name="key" value="${key}"><input type="number" name="limit" min="1" required value="${limit ?? ''}" aria-label="limit of key ${key}">
<button type="submit">Set key limit…</button></form>`;
}

function queueSettingForm(
  queue: string,
  field: 'concurrency' | 'key_concurrency',
  label: string,
  current: { value: number | null; source: string },
) {
  return html`<form class="inline" method="get" action="/dashboard/confirm/queue-set"><input type="hidden" name="queue" value="${queue}">
<input type="hidden" name="field" value="${field}"><label>${label} ${limitText(current.value, current.source)}</label>
<input type="number" name="value" min="1" placeholder="none" value="${current.source === 'override' ? (current.value ?? '') : ''}" aria-label="${label}">
<button type="submit">Set…</button></form>`;
}

const KEY_STRATEGIES = ['queue', 'cancel_in_progress', 'cancel_newest', 'replace_pending'] as const;

/** The queue's key strategy (what an enqueue does to a busy key), with a form that overrides it. */
function keyStrategyForm(queue: string, current: QueueView['key_strategy']) {
  return html`<form class="inline" method="get" action="/dashboard/confirm/key-strategy"><input type="hidden" name="queue" value="${queue}">
<label for="key-strategy">Key strategy <b>${current.value}</b> <span class="source">${current.source}</span></label>
<select id="key-strategy" name="value">${KEY_STRATEGIES.map((s) => html`<option value="${s}"${s === current.value ? ' selected' : ''}>${s}</option>`)}<option value="">(remove the override)</option></select>
<button type="submit">Set…</button></form>`;
}

export function queuePage(q: QueueView, p: ConcurrencyPicture, topKeys: number) {
  const name = encodeURIComponent(q.name);
  return html`<h1>Queue <code>${q.name}</code> ${q.paused.value ? html`<span class="badge paused">paused</span>` : ''}${q.pull.value ? html` <span class="badge" title="consumed by pulling (POST /v1/queues/${q.name}/lease), not pushed">pulled</span>` : ''}</h1>
<p><a href="${href('/tasks', { queue: q.name })}">${q.counts.pending} pending</a> · ${q.counts.leased} leased ·
<a href="${href('/dead', { queue: q.name })}">${q.counts.dead} dead</a> · <a href="${href('/waiting')}">waiting time</a></p>
<h2>Slots</h2>
<div data-live="${href(`/queues/${name}/live`)}">${slotsFragment(p, topKeys)}</div>
<h2>Limits</h2>
<div class="panel actions">
${queueSettingForm(q.name, 'concurrency', 'Queue limit', q.concurrency)}
${queueSettingForm(q.name, 'key_concurrency', 'Key concurrency', q.key_concurrency)}
${keyStrategyForm(q.name, q.key_strategy)}
</div>
<div class="panel actions">
<form class="inline" method="get" action="/dashboard/confirm/key-limit"><input type="hidden" name="queue" value="${q.name}">
<label>Limit of key <input name="key" required maxlength="256" aria-label="key"></label><input type="number" name="limit" min="1" required aria-label="limit">
<button type="submit">Set key limit…</button></form>
<a href="${href(`/confirm/${q.paused.value ? 'resume' : 'pause'}`, { queue: q.name })}">${q.paused.value ? 'Resume the queue…' : 'Pause the queue…'}</a>
<a href="${href('/confirm/queue-reset', { queue: q.name })}">Remove every run-time override…</a>
</div>`;
}
