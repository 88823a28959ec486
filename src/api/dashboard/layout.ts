/**
 * The dashboard's page shell: one stylesheet and one small script, both inline and allowed by
 * hash in the Content-Security-Policy (guard.ts), so a page is one request and nothing else runs.
 *
 * Pages are written with Hono's `html` tagged template (hono/html), the string side of Hono's
 * JSX runtime: every interpolated value is escaped, nested templates and arrays compose, and no
 * build step is needed. JSX syntax itself is not used: the Node server runs these files through
 * Node's type stripping (`node src/node/serve.ts`), which does not accept .tsx.
 */
import { html, raw } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import { href } from './format.ts';

type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

export const STYLE = `
:root{--fg:#1d2330;--muted:#6b7385;--line:#dde1e8;--bg:#f6f7f9;--held:#3b6fd4;--free:#e3e7ee;--over:#d64545;--ok:#2f8f5b;--warn:#b7791f}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header{display:flex;align-items:center;gap:1.5rem;padding:.6rem 1.25rem;background:#1d2330;color:#fff}
header a{color:#cfd6e4;text-decoration:none}header a.here,header a:hover{color:#fff}.brand{font-weight:700;color:#fff!important;letter-spacing:.02em}
header nav{display:flex;gap:1rem;flex:1}header form{display:flex;gap:.5rem;align-items:center;color:#9aa3b5}
main{max-width:72rem;margin:0 auto;padding:1rem 1.25rem 3rem}h1{font-size:1.35rem;margin:.6rem 0 1rem}h2{font-size:1.05rem;margin:1.6rem 0 .6rem}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid var(--line)}th,td{padding:.35rem .6rem;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{font-weight:600;color:var(--muted);font-size:.85em;background:#fbfbfc}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
a{color:#2456b3}.muted,.source{color:var(--muted)}.source{font-size:.8em;border:1px solid var(--line);border-radius:3px;padding:0 .3em;margin-left:.2em}
.badge{font-size:.8em;border-radius:3px;padding:.05em .45em;background:var(--free)}.badge.paused,.badge.dead{background:#fbe3e3;color:#9b2c2c}
.badge.leased{background:#e1ebfb;color:#23489a}.badge.succeeded{background:#dff3e8;color:#226943}.badge.pending{background:#fdf3dc;color:#7a5412}
.notice{background:#e6f4ec;border:1px solid #b9dfc8;padding:.5rem .8rem;border-radius:4px;margin:.5rem 0 1rem}.error{background:#fbe9e9;border-color:#efc2c2}
.panel{background:#fff;border:1px solid var(--line);border-radius:6px;padding:.8rem 1rem;margin:.8rem 0}
.level{display:grid;grid-template-columns:11rem 21rem 1fr;gap:.4rem 1rem;align-items:center}.level h3{margin:0;font-size:.95rem;overflow-wrap:anywhere}
.bar .free{fill:var(--free)}.bar .held{fill:var(--held)}.bar .over{fill:var(--over)}.count{font-variant-numeric:tabular-nums}
.slots{display:flex;flex-wrap:wrap;gap:.4rem;list-style:none;margin:.6rem 0 0;padding:0;grid-column:1/-1}
.slot{border:1px solid var(--line);border-radius:5px;padding:.3rem .5rem;min-width:12rem;background:#fff;font-size:.85em}
.slot.held{border-color:#a9c0ee;background:#f1f5fd}.slot.expired{border-color:#efc2c2;background:#fdf3f3}.slot.free{min-width:3.2rem;color:var(--muted);text-align:center;background:repeating-linear-gradient(45deg,#fff,#fff 4px,#f3f4f7 4px,#f3f4f7 8px)}.slot.shut{color:var(--muted);background:#eceef2;border-style:dashed}
.slot b{font-size:1.05em}.slot .act{display:inline-block;margin-top:.2rem}.level>.actions,.level>.caption{grid-column:1/-1}.caption{margin:.4rem 0 0;font-size:.85em;color:var(--muted)}
form.inline{display:inline-flex;gap:.35rem;align-items:center;margin:0}input,select,button{font:inherit;padding:.2rem .45rem;border:1px solid #c4cad6;border-radius:4px;background:#fff}
input[type=number]{width:5.5rem}button{background:#eef1f6;cursor:pointer}button.primary{background:var(--held);border-color:var(--held);color:#fff}button.danger{background:var(--over);border-color:var(--over);color:#fff}
.filters{display:flex;flex-wrap:wrap;gap:.6rem;align-items:end;margin:.4rem 0 1rem}.filters label{display:flex;flex-direction:column;font-size:.85em;color:var(--muted)}
pre{background:#fff;border:1px solid var(--line);border-radius:4px;padding:.6rem;overflow:auto;white-space:pre-wrap;overflow-wrap:anywhere;max-height:28rem}
pre.curl{background:#1d2330;color:#e6e9ef;border:0}dl{display:grid;grid-template-columns:10rem 1fr;gap:.2rem 1rem;margin:0}dt{color:var(--muted)}dd{margin:0;overflow-wrap:anywhere}
.live{font-size:.8em;color:var(--muted)}.actions{display:flex;flex-wrap:wrap;gap:1rem;align-items:center}
.login{max-width:26rem;margin:4rem auto}.login input{width:100%;margin:.4rem 0 .8rem}
@media (max-width:48rem){header,header nav{flex-wrap:wrap;gap:.5rem 1rem}main{padding:.6rem .6rem 2rem}
table{display:block;overflow-x:auto}.level,dl{grid-template-columns:1fr}.bar{max-width:100%}.slot{min-width:0}}
`;

/**
 * Live parts of a page (`data-live="<url>"`) are fetched again every 2 s and replaced, while the
 * page is visible and nobody is typing in them; a page read without JavaScript shows a refresh link.
 */
export const SCRIPT = `
for (const el of document.querySelectorAll('[data-live]')) {
  const timer = setInterval(async () => {
    if (document.hidden || el.contains(document.activeElement)) return;
    try {
      const res = await fetch(el.dataset.live, { headers: { accept: 'text/html' }, redirect: 'manual' });
      if (res.ok) el.innerHTML = await res.text();
      else if (res.status === 401 || res.type === 'opaqueredirect') { clearInterval(timer); el.classList.add('stale'); }
    } catch {}
  }, 2000);
}
`;

const NAV = [
  ['/', 'Queues'],
  ['/tasks', 'Tasks'],
  ['/dead', 'Dead letters'],
  ['/waiting', 'Waiting time'],
  ['/groups', 'Groups'],
  ['/endpoints', 'Endpoints'],
] as const;

export interface PageOptions {
  title: string;
  /** The nav entry this page belongs to (`/`, `/tasks`, …). */
  section?: string;
  /** The key a session belongs to, for the header; absent on the login page. */
  keyName?: string;
  notice?: { text: string; error?: boolean } | null;
}

export function page(options: PageOptions, body: Html | Html[]): Html {
  const nav = options.keyName
    ? html`<nav>${NAV.map(([path, label]) => html`<a href="${href(path === '/' ? '' : path)}" class="${options.section === path ? 'here' : ''}">${label}</a>`)}</nav>
<form method="post" action="/dashboard/logout"><span>${options.keyName}</span><button type="submit">Log out</button></form>`
    : html`<nav></nav>`;
  const notice = options.notice
    ? html`<p class="notice${options.notice.error ? ' error' : ''}" role="status">${options.notice.text}</p>`
    : '';
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${options.title} · Sluice</title><style>${raw(STYLE)}</style></head>
<body><header><a class="brand" href="/dashboard">Sluice</a>${nav}</header>
<main>${notice}${body}</main><script>${raw(SCRIPT)}</script></body></html>`;
}
