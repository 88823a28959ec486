/**
 * One push: the signed HTTP request that carries a leased task to its endpoint
 * (docs/DESIGN.md §3). Never follows redirects; reads at most 64 KiB of the answer; gives up
 * before the lease ends; a push that timed out or lost its connection keeps its slot until the
 * lease expires (core/outcome.ts `unanswered`), since its handler may still be running.
 */
import type { PushResult } from '../core/outcome.ts';
import { attemptSpanId, childTraceparent, parseTraceparent, TRACEPARENT } from '../core/trace.ts';
import type { LeasedTask } from '../core/types.ts';
import { utf8 } from '../sdk/protocol/encoding.ts';
import { HEADERS } from '../sdk/protocol/headers.ts';
import { FORWARD_ISSUER, signPush } from '../sdk/protocol/signature.ts';
import { signWebhook } from '../sdk/protocol/webhook.ts';
import type { Keyring } from '../security/keyring.ts';
import { signLeaseToken } from '../security/lease-token.ts';
import { checkTarget, PrivateTargetError } from '../security/targets.ts';
import { endpointWebhookKey, forwardWebhookKey } from '../security/webhook-secrets.ts';
import { type PushRequest, type PushTransport, UnsendableRequest } from './transport.ts';

/** What signing a push takes: a pusher's, or the pull route's making a push for `sluice listen`. */
export interface SigningDeps {
  keyring: Keyring;
  issuer: string;
  webhookSecret: Uint8Array<ArrayBuffer> | null;
  webhookSecretNext: Uint8Array<ArrayBuffer> | null;
  /** A lease token is good for as long as its lease can be held, heartbeats included. */
  maxLeaseMs: number;
  /**
   * Signs a forwarded push (a pull's `push_to`): with the forwarding key, issuer and webhook
   * secrets, which no production receiver accepts (security/forwarding.ts). Default false.
   */
  forwarded?: boolean;
}

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

/** The protocol's header names as a push's request holds them: lower case. */
const WIRE = Object.fromEntries(Object.entries(HEADERS).map(([k, v]) => [k, v.toLowerCase()])) as { [K in keyof typeof HEADERS]: string };

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
 * The push of a leased task to `url`, signed: the task's headers, Sluice's, the signatures and
 * the lease token. What the dispatcher sends, and what the pull route hands `sluice listen`
 * to send to a handler on the consumer's machine (src/api/pull.ts).
 */
export async function signedRequest(
  task: LeasedTask,
  url: string,
  deps: SigningDeps,
  nowMs: number,
): Promise<Omit<PushRequest, 'timeoutMs'>> {
  const bodyText = task.body ?? '';
  const bytes = utf8(bodyText);
  const forwarded = deps.forwarded === true;
  const [signature, leaseToken] = await Promise.all([
    signPush({
      key: forwarded ? deps.keyring.forward.active : deps.keyring.active,
      issuer: forwarded ? FORWARD_ISSUER : deps.issuer,
      taskId: task.id,
      leaseId: task.lease.id,
      url,
      body: bytes,
      nowMs,
    }),
    // The lease token is Sluice's own to check, forwarded or not.
    leaseTokenFor(task, deps),
  ]);
  const headers = attemptHeaders(task);
  if (task.body !== null) headers['content-type'] = task.contentType;
  headers[WIRE.taskId] = task.id;
  headers[WIRE.queue] = task.queue;
  // Keys may be any Unicode text; a header carries it percent-encoded (UTF-8), as `encodeURIComponent` does.
  if (task.concurrencyKey !== null) headers[WIRE.concurrencyKey] = encodeURIComponent(task.concurrencyKey);
  headers[WIRE.attempt] = String(task.attempts);
  if (task.resumes > 0) headers[WIRE.resume] = String(task.resumes);
  headers[WIRE.maxAttempts] = String(task.maxAttempts);
  headers[WIRE.leaseId] = task.lease.id;
  headers[WIRE.leaseExpiresAt] = task.lease.expiresAt.toISOString();
  headers[WIRE.leaseToken] = leaseToken;
  headers[WIRE.signature] = signature;
  if (deps.webhookSecret) {
    // webhook-id is the task id: the same on every retry, so receivers can deduplicate.
    const timestamp = Math.floor(nowMs / 1000);
    headers[WIRE.webhookId] = task.id;
    headers[WIRE.webhookTimestamp] = String(timestamp);
    // Each endpoint has a secret of its own, derived from the master (security/webhook-secrets.ts);
    // while the master rotates, a signature under each (receivers check any of them).
    const masters = deps.webhookSecretNext ? [deps.webhookSecret, deps.webhookSecretNext] : [deps.webhookSecret];
    const webhookKey = forwarded ? forwardWebhookKey : endpointWebhookKey;
    const signatures = await Promise.all(
      masters.map(async (master) => signWebhook(await webhookKey(master, url), task.id, timestamp, bodyText)),
    );
    headers[WIRE.webhookSignature] = signatures.join(' ');
  }
  const sendsBody = task.method !== 'GET' && task.body !== null;
  return { url, method: task.method, headers, body: sendsBody ? bytes : null };
}

/** The lease's token: good for that one lease, for as long as it can be held. */
export function leaseTokenFor(task: LeasedTask, deps: Pick<SigningDeps, 'keyring' | 'issuer' | 'maxLeaseMs'>): Promise<string> {
  return signLeaseToken(
    deps.keyring,
    { taskId: task.id, leaseId: task.lease.id },
    task.lease.leasedAt.getTime() + deps.maxLeaseMs,
    deps.issuer,
  );
}

/**
 * The task's own headers as an attempt carries them (none is one of Sluice's: the API refuses
 * those), by lower-case name, as a fetch's Headers would hold them (in an object with no
 * prototype, so that no name is special). A task enqueued in a trace: the attempt is a span of
 * its own, a child of the enqueuer's.
 */
export function attemptHeaders(task: LeasedTask): Record<string, string> {
  const headers: Record<string, string> = Object.create(null);
  for (const [name, value] of Object.entries(task.headers)) {
    const lower = name.toLowerCase();
    headers[lower] = lower in headers ? `${headers[lower]}, ${value}` : value;
  }
  const parent = headers[TRACEPARENT] === undefined ? null : parseTraceparent(headers[TRACEPARENT]);
  if (parent) headers[TRACEPARENT] = childTraceparent(parent, attemptSpanId(task.lease.id));
  return headers;
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
