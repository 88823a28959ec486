/** Unauthenticated endpoints: health, the public signing keys, the OpenAPI document and its page. */
import { Hono } from 'hono';
import { type SchemaState, schemaProblem, schemaState } from '../../db/migrate.ts';
import { FORWARD_JWKS_PATH } from '../../protocol/signature.ts';
import type { Answer, health } from '../answers.ts';
import type { AppEnv } from '../context.ts';
import { openApiDocument } from '../openapi/document.ts';

export const meta = new Hono<AppEnv>();

// Healthy: the database answers, with the schema this version is written for.
meta.get('/healthz', async (c) => {
  let state: SchemaState;
  try {
    state = await schemaState(c.var.db);
  } catch {
    return c.json({ status: 'unavailable', detail: 'the database does not answer' } satisfies Answer<typeof health>, 503);
  }
  if (state !== 'current') return c.json({ status: 'unavailable', detail: schemaProblem(state) } satisfies Answer<typeof health>, 503);
  return c.json({ status: 'ok' } satisfies Answer<typeof health>);
});

meta.get('/.well-known/jwks.json', async (c) => {
  const keyring = await c.var.keyring();
  return c.json(keyring.jwks, 200, { 'cache-control': 'public, max-age=300' });
});

// The keys of forwarded pushes (security/forwarding.ts), apart, so that no verifier of
// production pushes trusts them by reading the JWKS above.
meta.get(FORWARD_JWKS_PATH, async (c) => {
  const keyring = await c.var.keyring();
  return c.json(keyring.forward.jwks, 200, { 'cache-control': 'public, max-age=300' });
});

let document: object | null = null;

meta.get('/openapi.json', (c) => {
  document ??= openApiDocument();
  return c.json(document, 200, { 'cache-control': 'public, max-age=300' });
});

let docsPolicy: Promise<string> | null = null;

/** The page runs only its own inline script and style (by hash) and fetches only this origin. */
async function contentSecurityPolicy(html: string): Promise<string> {
  const hash = async (text: string) => {
    const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text)));
    return `'sha256-${btoa(String.fromCharCode(...digest))}'`;
  };
  const script = /<script>([\s\S]*?)<\/script>/.exec(html)?.[1] ?? '';
  const style = /<style>([\s\S]*?)<\/style>/.exec(html)?.[1] ?? '';
  return `default-src 'none'; script-src ${await hash(script)}; style-src ${await hash(style)}; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'`;
}

meta.get('/docs', async (c) => {
  docsPolicy ??= contentSecurityPolicy(DOCS_HTML);
  return c.html(DOCS_HTML, 200, { 'content-security-policy': await docsPolicy });
});

/** /docs: a page that lists the operations and schemas of /openapi.json (its script is pinned by hash in the CSP). */
const DOCS_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sluice API</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
h2{border-bottom:1px solid #ddd;margin-top:2rem}.op{margin:.6rem 0;padding:.4rem .6rem;border-left:4px solid #4a7}
.m{font-weight:700;display:inline-block;min-width:4.5rem}code,pre{background:#f5f5f5;padding:.1rem .3rem}pre{padding:.6rem;overflow:auto}
.scope{color:#666;font-size:.9em}</style></head>
<body><h1>Sluice API</h1><p>Generated from <a href="/openapi.json">/openapi.json</a>.</p><div id="ops">Loading…</div>
<script>
fetch('/openapi.json').then(r=>r.json()).then(doc=>{
  const root=document.getElementById('ops');root.textContent='';
  const esc=s=>String(s).replace(/[&<>]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;'}[c]));
  for(const [path,item] of Object.entries(doc.paths)){
    for(const [m,op] of Object.entries(item)){ if(m==='parameters')continue;
      const d=document.createElement('div');d.className='op';
      d.innerHTML='<span class="m">'+m.toUpperCase()+'</span> <code>'+esc(path)+'</code> — '+esc(op.summary||'')+' <span class="scope">'+esc(op.description||'')+'</span>';
      root.appendChild(d);}}
  const h=document.createElement('h2');h.textContent='Schemas';root.appendChild(h);
  for(const [name,s] of Object.entries(doc.components.schemas)){
    const t=document.createElement('h3');t.textContent=name;root.appendChild(t);
    const p=document.createElement('pre');p.textContent=JSON.stringify(s,null,2);root.appendChild(p);}
});
</script></body></html>`;
