// @ts-check
/**
 * What a user's project writes to receive Sluice's pushes, with the SDK installed from its
 * tarball: verify each push, then answer with what was verified (it becomes the task's result).
 * Copied into fresh Node, Bun, Deno and Worker projects by test/runtimes/sdk-package.test.ts.
 */
import { createHandler } from '@sluice/sdk';

/**
 * @param {string} sluiceUrl where the public keys are read from
 * @returns {(request: Request, ctx?: import('@sluice/sdk').ExecutionContextLike) => Promise<Response>}
 */
export function receivePushes(sluiceUrl) {
  return createHandler((push) => ({ verified: push.taskId, attempt: push.attempt, body: push.json(), runtime: navigator.userAgent }), {
    sluiceUrl,
  });
}
