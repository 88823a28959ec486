// @ts-check
/** The receiver as a Cloudflare Worker, with `SLUICE_URL` bound in its environment. */
import { receivePushes } from './receiver.js';

/**
 * One handler per isolate, so its key cache and replay cache outlive a request.
 * @type {ReturnType<typeof receivePushes> | undefined}
 */
let handle;

export default {
  /**
   * @param {Request} request
   * @param {{ SLUICE_URL: string }} env
   * @param {import('@sluice/sdk').ExecutionContextLike} ctx
   */
  fetch(request, env, ctx) {
    handle ??= receivePushes(env.SLUICE_URL);
    return handle(request, ctx);
  },
};
