/** The handler as a Cloudflare Worker: `wrangler dev examples/worker.ts --var SLUICE_URL:…`. */
import type { ExecutionContextLike } from '../src/sdk/index.ts';
import { exampleHandler } from './handler.ts';

export default {
  fetch(request: Request, env: { SLUICE_URL: string }, ctx: ExecutionContextLike): Promise<Response> {
    // In lease mode the work continues after the response: ctx.waitUntil keeps it alive.
    return exampleHandler(env.SLUICE_URL)(request, ctx);
  },
};
