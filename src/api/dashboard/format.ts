/** Small pieces every dashboard page uses: durations, times, links, and the bar of a level's slots. */
import { html } from 'hono/html';

/** A duration for people: `850 ms`, `4.2 s`, `3 min 5 s`, `2 h 10 min`, `3 d 4 h`. */
export function duration(ms: number): string {
  const a = Math.abs(ms);
  if (a < 1_000) return `${Math.round(a)} ms`;
  if (a < 60_000) return `${(a / 1_000).toFixed(a < 10_000 ? 1 : 0)} s`;
  const s = Math.floor(a / 1_000);
  if (s < 3_600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ''}`;
  if (s < 86_400) return `${Math.floor(s / 3_600)} h${s % 3_600 >= 60 ? ` ${Math.floor((s % 3_600) / 60)} min` : ''}`;
  return `${Math.floor(s / 86_400)} d${s % 86_400 >= 3_600 ? ` ${Math.floor((s % 86_400) / 3_600)} h` : ''}`;
}

/** A time as UTC to the second, in a `<time>` element that carries the exact instant. */
export function time(at: Date | null) {
  if (at === null) return html`<span class="muted">—</span>`;
  return html`<time datetime="${at.toISOString()}">${at.toISOString().slice(0, 19).replace('T', ' ')} UTC</time>`;
}

/** A dashboard path with a query string of the non-empty values. */
export function href(path: string, query: Record<string, string | number | null | undefined> = {}): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== null && v !== undefined && v !== '') params.set(k, String(v));
  const text = params.toString();
  return `/dashboard${path}${text ? `?${text}` : ''}`;
}

export function taskLink(id: string) {
  return html`<a href="${href(`/tasks/${id}`)}">#${id}</a>`;
}

/** A limit and where it comes from: `5 (env)`, or `none`. */
export function limitText(limit: number | null, source: string) {
  return limit === null ? html`<span class="muted">none</span>` : html`${limit} <span class="source">${source}</span>`;
}

/**
 * A level's slots as a bar: the held part against the limit (an SVG drawn with attributes, which
 * the page's Content-Security-Policy allows, unlike inline styles). Without a limit the bar is
 * scaled to what is held; above the limit (after a limit was lowered) the excess shows red.
 */
export function bar(active: number, limit: number | null, label: string) {
  // With no limit there is nothing to fill: the count beside it says "n / ∞".
  if (limit === null) return '';
  const width = 320;
  const scale = Math.max(limit, active, 1);
  const held = Math.round((Math.min(active, limit) / scale) * width);
  const over = active > limit ? Math.round(((active - limit) / scale) * width) : 0;
  return html`<svg class="bar" width="${width}" height="14" viewBox="0 0 ${width} 14" role="img" aria-label="${label}: ${active} of ${limit} slots held">
<rect class="free" width="${width}" height="14" rx="3"></rect><rect class="held" width="${held}" height="14" rx="3"></rect>${
    over > 0 ? html`<rect class="over" x="${held}" width="${over}" height="14"></rect>` : ''
  }</svg>`;
}
