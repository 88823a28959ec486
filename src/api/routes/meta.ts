/** Unauthenticated endpoints: health, the public signing keys, the OpenAPI document and its page. */
import { Hono } from 'hono';
import { type SchemaState, schemaProblem, schemaState } from '../../db/migrate.ts';
import type { AppEnv } from '../context.ts';
import { DOCS_HTML, openApiDocument } from '../openapi.ts';

export const meta = new Hono<AppEnv>();

// Healthy: the database answers, with the schema this version is written for.
meta.get('/healthz', async (c) => {
  let state: SchemaState;
  try {
    state = await schemaState(c.var.db);
  } catch {
    return c.json({ status: 'unavailable', detail: 'the database does not answer' }, 503);
  }
  if (state !== 'current') return c.json({ status: 'unavailable', detail: schemaProblem(state) }, 503);
  return c.json({ status: 'ok' });
});

meta.get('/.well-known/jwks.json', async (c) => {
  const keyring = await c.var.keyring();
  return c.json(keyring.jwks, 200, { 'cache-control': 'public, max-age=300' });
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
