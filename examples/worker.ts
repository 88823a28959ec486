/** The handler as a Cloudflare Worker: `wrangler dev examples/worker.ts --var SLUICE_URL:…`. */
import type { ExecutionContextLike } from '../src/sdk/index.ts';
import { exampleHandler } from './handler.ts';

// One handler per isolate, so the JWKS cache and the replay cache live across requests.
let handler: ReturnType<typeof exampleHandler> | undefined;

export default {
  fetch(request: Request, env: { SLUICE_URL: string }, ctx: ExecutionContextLike): Promise<Response> {
    handler ??= exampleHandler(env.SLUICE_URL);
    // In lease mode the work continues after the response: ctx.waitUntil keeps it alive.
    return handler(request, ctx);
  },
};
