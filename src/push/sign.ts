/**
 * Signing a push (docs/DESIGN.md §3): the request a leased task becomes, with the task's headers,
 * Sluice's, the JWS, the Standard Webhooks signatures and the lease token. What a pusher sends,
 * and what the pull route hands `sluice listen` to forward (src/api/pull.ts).
 */
import { attemptSpanId, childTraceparent, parseTraceparent, TRACEPARENT } from '../core/trace.ts';
import type { LeasedTask } from '../core/types.ts';
import { utf8 } from '../protocol/encoding.ts';
import { HEADERS } from '../protocol/headers.ts';
import { FORWARD_ISSUER, signPush } from '../protocol/signature.ts';
import { signWebhook } from '../protocol/webhook.ts';
import type { Keyring } from '../security/keyring.ts';
import { signLeaseToken } from '../security/lease-token.ts';
import { endpointWebhookKey, forwardWebhookKey } from '../security/webhook-secrets.ts';
import type { PushRequest } from './transport.ts';

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

/** The protocol's header names as a push's request holds them: lower case. */
const WIRE = Object.fromEntries(Object.entries(HEADERS).map(([k, v]) => [k, v.toLowerCase()])) as { [K in keyof typeof HEADERS]: string };

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
