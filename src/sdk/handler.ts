/**
 * `createHandler(fn)`: a web-standard `(Request) => Promise<Response>` that verifies each push,
 * runs `fn`, and answers in the protocol's terms. Two modes:
 *
 * - `respond` (default): `fn` runs within the push; its return value is the 2xx answer (the
 *   task's result). Its `signal` aborts shortly before the lease ends.
 * - `lease`: the push is answered at once with `Sluice-Ack: lease`; `fn` runs in the
 *   background (hand its promise to the platform with `ctx.waitUntil` where there is one),
 *   heartbeats keep the lease at a safe fraction of it, and the end completes or fails it.
 *   A lost lease or a cancellation aborts `signal`.
 *
 * In both, `NonRetriableError` ends the task `dead`, and `RetryAfterError` asks to be tried
 * again later without using an attempt.
 */

import { HEADERS } from '../protocol/headers.ts';
import { SignatureError } from '../protocol/signature.ts';
import { NonRetriableError, RetryAfterError } from './errors.ts';
import { createReceiver, type Push, type ReceiverOptions } from './receiver.ts';

export interface TaskContext {
  /** Aborted when the lease is lost, the task is cancelled, or (respond mode) time is up. */
  signal: AbortSignal;
  /** Extends the lease now (lease mode; heartbeats also run by themselves). */
  heartbeat(extendMs?: number): Promise<Date>;
  /**
   * Lease mode: wait for children of this task (tasks enqueued with its id as `parent_id`;
   * all of them when none are named). The lease ends here; once they have all finished, the
   * task is pushed again with `push.resume` one higher, its attempt given back. Return what it
   * returns: nothing more is sent for this push. Rejects with the API's answer when the wait
   * is refused (409 `recursive_wait_deadlock`: it could never be served).
   */
  waitFor(children?: readonly string[]): Promise<Waiting>;
}

/** What `waitFor` answers: the children it waits on. */
export interface Waiting {
  waiting: true;
  waitingOn: string[];
}

export interface HandlerOptions extends ReceiverOptions {
  /** `respond` (default) or `lease`; see above. */
  mode?: 'respond' | 'lease';
  /** Heartbeat when this fraction of the lease's remaining time has passed. Default 1/3. */
  heartbeatFraction?: number;
  /** Called with errors of background work (lease calls that failed). Default `console.error`. */
  onError?: (error: unknown) => void;
}

export interface ExecutionContextLike {
  waitUntil(promise: Promise<unknown>): void;
}

export type TaskFunction<R> = (push: Push, ctx: TaskContext) => Promise<R> | R;

/** Time kept before the lease ends (respond mode) so the answer still arrives in time. */
const RESPOND_MARGIN_MS = 1_000;

export function createHandler<R>(
  fn: TaskFunction<R>,
  options: HandlerOptions,
): (request: Request, ctx?: ExecutionContextLike) => Promise<Response> {
  const receiver = createReceiver(options);
  const mode = options.mode ?? 'respond';
  const sluiceUrl = baseUrl(options);
  const onError = options.onError ?? ((e: unknown) => console.error('sluice handler:', e));
  const now = options.now ?? Date.now;

  return async (request, ctx) => {
    let push: Push;
    try {
      push = await receiver.verify(request);
    } catch (error) {
      if (error instanceof SignatureError && error.check === 'keys_unavailable') {
        // Not the push's fault: ask Sluice to come back later, without using an attempt.
        return new Response(error.message, { status: 503, headers: { 'retry-after': '30' } });
      }
      if (error instanceof SignatureError) return text(401, `push refused (${error.check}): ${error.message}`);
      throw error;
    }
    if (mode === 'respond') return respond(fn, push, request.signal, now);
    if (!sluiceUrl) return text(500, 'lease mode needs sluiceUrl (or jwksUrl) to reach the lease API');
    const work = holdLease(fn, push, sluiceUrl, options.heartbeatFraction ?? 1 / 3, now, options.fetch).catch(onError);
    ctx?.waitUntil(work);
    return new Response(JSON.stringify({ accepted: push.taskId }), {
      status: 202,
      headers: { 'content-type': 'application/json', [HEADERS.ack]: 'lease' },
    });
  };
}

async function respond<R>(fn: TaskFunction<R>, push: Push, requestSignal: AbortSignal, now: () => number): Promise<Response> {
  const controller = new AbortController();
  // Stop when Sluice hangs up (its push timeout, shorter than the lease) or the lease nears its end.
  requestSignal.addEventListener('abort', () => controller.abort(new Error('Sluice closed the push (timeout)')), { once: true });
  const expiresAt = push.lease.expiresAt.getTime();
  const timer = Number.isFinite(expiresAt)
    ? setTimeout(() => controller.abort(new Error('the lease is about to end')), Math.max(0, expiresAt - now() - RESPOND_MARGIN_MS))
    : undefined;
  try {
    const result = await fn(push, {
      signal: controller.signal,
      heartbeat: () => Promise.reject(new Error('heartbeat needs mode: "lease"')),
      waitFor: () => Promise.reject(new Error('waitFor needs mode: "lease"')),
    });
    if (result === undefined) return new Response(null, { status: 204 });
    return new Response(typeof result === 'string' ? result : JSON.stringify(result), {
      status: 200,
      headers: { 'content-type': typeof result === 'string' ? 'text/plain; charset=utf-8' : 'application/json' },
    });
  } catch (error) {
    if (error instanceof RetryAfterError) {
      return new Response(error.message, { status: 503, headers: { 'retry-after': String(Math.ceil(error.retryAfterMs / 1000)) } });
    }
    const message = error instanceof Error ? error.message : String(error);
    if (error instanceof NonRetriableError) return new Response(message, { status: 422, headers: { [HEADERS.retry]: 'false' } });
    return text(500, message);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs `fn` holding the lease: heartbeats, then complete, fail or release. */
async function holdLease<R>(
  fn: TaskFunction<R>,
  push: Push,
  sluiceUrl: string,
  fraction: number,
  now: () => number,
  fetchImpl: typeof fetch | undefined,
): Promise<void> {
  const controller = new AbortController();
  const doFetch = fetchImpl ?? ((input: RequestInfo | URL, init?: RequestInit) => fetch(input, init));
  // A push in a trace: its lease calls are children of the attempt's span (its traceparent).
  const trace = push.headers.get('traceparent');
  const call = async (action: string, body: unknown): Promise<Response> =>
    doFetch(`${sluiceUrl}/v1/leases/${encodeURIComponent(push.lease.id)}/${action}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${push.lease.token}`,
        'content-type': 'application/json',
        ...(trace ? { traceparent: trace } : {}),
      },
      body: JSON.stringify(body),
    });

  let expiresAt = push.lease.expiresAt.getTime();
  const heartbeat = async (extendMs?: number): Promise<Date> => {
    const response = await call('heartbeat', extendMs === undefined ? {} : { extend_ms: extendMs });
    const data = (await response.json().catch(() => ({}))) as { expires_at?: string; code?: string; detail?: string };
    if (response.ok && data.expires_at) {
      expiresAt = Date.parse(data.expires_at);
      return new Date(expiresAt);
    }
    if (response.status === 409) controller.abort(new Error(`lease ended: ${data.code ?? 'lease_lost'}`));
    throw new Error(`heartbeat failed: ${response.status} ${data.detail ?? ''}`.trim());
  };

  let timer: ReturnType<typeof setTimeout> | undefined;
  let done = false;
  const schedule = () => {
    const wait = Math.max(250, (expiresAt - now()) * fraction);
    timer = setTimeout(async () => {
      if (done) return;
      try {
        await heartbeat();
      } catch {
        // A lost lease has aborted the signal; a passing network fault is tried next tick.
      }
      if (!done && !controller.signal.aborted) schedule();
    }, wait);
  };
  schedule();

  // After a wait the lease is over: nothing more is sent for this push.
  let waited = false;
  const waitFor = async (children?: readonly string[]): Promise<Waiting> => {
    const response = await call('wait', children === undefined ? {} : { children });
    const data = (await response.json().catch(() => ({}))) as { waiting_on?: string[]; code?: string; detail?: string };
    const refused = `wait refused: ${response.status} ${data.code ?? ''} ${data.detail ?? ''}`.trim();
    // A wait that could never be served never will be: the task ends dead rather than retrying.
    if (data.code === 'recursive_wait_deadlock') throw new NonRetriableError(refused);
    if (!response.ok) throw new Error(refused);
    waited = true;
    done = true;
    clearTimeout(timer);
    return { waiting: true, waitingOn: data.waiting_on ?? [] };
  };

  let ending: { action: string; body: unknown };
  try {
    const result = await fn(push, { signal: controller.signal, heartbeat, waitFor });
    ending = { action: 'complete', body: result === undefined ? {} : { result } };
  } catch (error) {
    if (error instanceof RetryAfterError) ending = { action: 'release', body: { delay_ms: clampDelay(error.retryAfterMs) } };
    else ending = { action: 'fail', body: { error: errorText(error), retry: !(error instanceof NonRetriableError) } };
  } finally {
    done = true;
    clearTimeout(timer);
  }
  // A lease already lost or cancelled, or ended by a wait, has nothing left to end.
  if (controller.signal.aborted || waited) return;
  const response = await call(ending.action, ending.body);
  if (!response.ok && response.status !== 409) throw new Error(`${ending.action} failed: ${response.status} ${await response.text()}`);
  await response.body?.cancel();
}

/** An error message the lease API accepts: no NUL, well-formed, at most 2,000 characters. */
function errorText(error: unknown): string {
  const message = (error instanceof Error ? error.message : String(error)) || 'failed';
  return message.replace(/\0/g, '').toWellFormed().slice(0, 2_000).toWellFormed();
}

/** A whole number of milliseconds within what the lease API accepts (a year). */
function clampDelay(ms: number): number {
  return Number.isFinite(ms) ? Math.min(365 * 24 * 3_600_000, Math.max(0, Math.ceil(ms))) : 0;
}

function baseUrl(options: HandlerOptions): string | null {
  if (options.sluiceUrl) return options.sluiceUrl.replace(/\/+$/, '');
  if (options.jwksUrl) return options.jwksUrl.replace(/\/\.well-known\/jwks\.json$/, '');
  return null;
}

function text(status: number, body: string): Response {
  return new Response(body, { status, headers: { 'content-type': 'text/plain; charset=utf-8' } });
}
