/** Unauthenticated endpoints: health, the public signing keys, the OpenAPI document and its page. */
import { Hono } from 'hono';
import type { AppEnv } from '../context.ts';
import { DOCS_HTML, openApiDocument } from '../openapi.ts';

export const meta = new Hono<AppEnv>();

meta.get('/healthz', async (c) => {
  try {
    await c.var.db.query('select 1');
    return c.json({ status: 'ok' });
  } catch {
    return c.json({ status: 'unavailable', detail: 'the database does not answer' }, 503);
  }
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

meta.get('/docs', (c) => c.html(DOCS_HTML));
