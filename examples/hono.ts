/** The handler as a route of an existing Hono app (any runtime Hono runs on). */
import { Hono } from 'hono';
import { createHandler } from '../src/sdk/index.ts';

const sluiceUrl = 'https://sluice.example.workers.dev';
const onTask = createHandler(async (push) => ({ received: push.json() }), { sluiceUrl });

export const app = new Hono();
app.post('/hooks/sluice', (c) => {
  // On Workers, lease-mode work continues under ctx.waitUntil; elsewhere there is no context.
  let ctx: { waitUntil(p: Promise<unknown>): void } | undefined;
  try {
    ctx = c.executionCtx;
  } catch {
    ctx = undefined;
  }
  return onTask(c.req.raw, ctx);
});
