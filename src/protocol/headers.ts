/** The push protocol's header names (docs/DESIGN.md §3), spelled once. */

export const HEADERS = Object.freeze({
  taskId: 'Sluice-Task-Id',
  queue: 'Sluice-Queue',
  concurrencyKey: 'Sluice-Concurrency-Key',
  attempt: 'Sluice-Attempt',
  /** On a push after a wait for children: how many waits it has resumed from (absent before any). */
  resume: 'Sluice-Resume',
  maxAttempts: 'Sluice-Max-Attempts',
  leaseId: 'Sluice-Lease-Id',
  leaseExpiresAt: 'Sluice-Lease-Expires-At',
  leaseToken: 'Sluice-Lease-Token',
  signature: 'Sluice-Signature',
  /** Response header: `lease` keeps the lease after a 2xx (long work). */
  ack: 'Sluice-Ack',
  /** Response header: `false` on a failure means retrying cannot help. */
  retry: 'Sluice-Retry',
  webhookId: 'webhook-id',
  webhookTimestamp: 'webhook-timestamp',
  webhookSignature: 'webhook-signature',
});

/** Headers a task may not set: Sluice's own, and hop-by-hop or framing headers. */
export function isReservedHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return lower.startsWith('sluice-') || lower.startsWith('webhook-') || lower.startsWith('proxy-') || RESERVED.has(lower);
}

const RESERVED = new Set([
  'connection',
  'content-length',
  'content-type',
  'host',
  'keep-alive',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
]);
