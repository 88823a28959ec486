/**
 * One push: the signed HTTP request that carries a leased task to its endpoint
 * (docs/DESIGN.md §3). Never follows redirects; reads at most 64 KiB of the answer; gives up
 * before the lease ends; a push that timed out or lost its connection keeps its slot until the
 * lease expires (core/outcome.ts `unanswered`), since its handler may still be running.
 */
import type { PushResult } from '../core/outcome.ts';
import type { LeasedTask } from '../core/types.ts';
import { checkTarget, PrivateTargetError } from '../security/targets.ts';
import { type SigningDeps, signedRequest } from './sign.ts';
import { type PushRequest, type PushTransport, UnsendableRequest } from './transport.ts';

export interface PushDeps extends SigningDeps {
  allowPrivateTargets: boolean;
  now: () => number;
  transport: PushTransport;
}

/**
 * Time kept between the push's deadline and the lease's end, for the claim's reply on its way
 * to us: a tenth of the lease, at most a second.
 */
const leaseMarginMs = (leaseMs: number) => Math.min(1_000, leaseMs / 10);

/** `waitedMs`: how long the task waited for a place after its claim answered (claimed ahead). */
export async function pushTask(task: LeasedTask, deps: PushDeps, waitedMs = 0): Promise<PushResult> {
  const started = deps.now();
  const elapsed = () => deps.now() - started;
  // A pull queue's task that names no url, in a queue pushed again (its `pull` setting undone).
  if (task.url === null)
    return { kind: 'refused', message: `no url: queue "${task.queue}" is not pulled, and this task names none`, durationMs: 0 };
  const target = checkTarget(task.url, deps.allowPrivateTargets);
  if (!target.ok) return { kind: 'refused', message: `url ${target.reason}`, durationMs: 0 };

  // A push starts as its claim returns (dispatcher/run.ts), or `waitedMs` after, so the lease's
  // length, both ends on the database's clock, less that wait, bounds it: comparing the expiry with our clock instead would cut
  // every push short (or refuse it) whenever our clock runs ahead of the database's.
  const leaseLengthMs = task.lease.expiresAt.getTime() - task.lease.leasedAt.getTime();
  const timeoutMs = Math.min(task.timeoutMs, leaseLengthMs - leaseMarginMs(task.leaseMs) - waitedMs);
  if (timeoutMs <= 0) return { kind: 'network', message: 'no time left in the lease to push', sent: false, durationMs: 0 };

  let request: PushRequest;
  try {
    request = { ...(await signedRequest(task, task.url, deps, started)), timeoutMs };
  } catch (error) {
    // A task Sluice cannot turn into a request never will be.
    return { kind: 'refused', message: `the request cannot be built: ${(error as Error).message}`, durationMs: elapsed() };
  }
  return exchange(request, deps.transport, elapsed);
}

/**
 * Sends a built push and says what came of it, as the outcome reads it (core/outcome.ts): the
 * dispatcher's, and `sluice listen`'s forward to a handler on the consumer's machine.
 */
export async function exchange(request: PushRequest, transport: PushTransport, elapsed: () => number): Promise<PushResult> {
  try {
    const answer = await transport(request);
    return { kind: 'response', status: answer.status, headers: answer.headers, body: answer.body, durationMs: elapsed() };
  } catch (error) {
    // A task Sluice cannot turn into a request (a header value the client refuses) never will be.
    if (error instanceof UnsendableRequest)
      return { kind: 'refused', message: `the request cannot be built: ${error.message}`, durationMs: elapsed() };
    if (isTimeout(error)) return { kind: 'timeout', durationMs: elapsed() };
    // The name resolved to a private address (Node checks and pins it): never sent.
    if (error instanceof PrivateTargetError) return { kind: 'refused', message: `url ${error.message}`, durationMs: elapsed() };
    return {
      kind: 'network',
      message: error instanceof Error ? error.message : String(error),
      sent: mayHaveArrived(error),
      durationMs: elapsed(),
    };
  }
}

/**
 * Failures that prove the request never reached the endpoint (Node's fetch names them); any
 * other failure, and every failure on Workers ("Network connection lost."), may have come after
 * the endpoint got the request.
 */
const NEVER_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

function mayHaveArrived(error: unknown): boolean {
  // A transport that knows (Node's pinned transport) says whether a connection was ever made.
  const sent = (error as { sent?: unknown })?.sent;
  if (typeof sent === 'boolean') return sent;
  const code = (error as { cause?: { code?: unknown } })?.cause?.code;
  return !(typeof code === 'string' && NEVER_SENT.has(code));
}

function isTimeout(error: unknown): boolean {
  return error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError');
}
