/**
 * The fault run's producer: enqueues items 0…n-1 through the API in batches, at a steady pace,
 * whatever the fault does. A batch whose answer is lost or refused (503, a dead process, a
 * stalled network) is sent again, to another process, with the same `dedup_key`s: what a
 * careful client does, and what docs/guide.md tells it to do.
 */
export interface ProducerResult {
  acked: Set<number>;
  /** Items sent more than once. */
  resent: Set<number>;
  /** Answers other than 201 or a retryable refusal (a 5xx other than 503, say). */
  bad: string[];
  /** 503s (and 429s) that came with Retry-After, and those that did not. */
  refusals: { withRetryAfter: number; without: number };
}

export interface ProducerOptions {
  items: number;
  batch: number;
  /** Time between the starts of two batches. */
  intervalMs: number;
  apiKey: string;
  url: () => string;
  task: (item: number) => Record<string, unknown>;
  /** Stops resending after this (a run that cannot enqueue fails). */
  deadlineMs?: number;
}

export function produce(options: ProducerOptions): { done: Promise<ProducerResult>; result: ProducerResult } {
  const result: ProducerResult = { acked: new Set(), resent: new Set(), bad: [], refusals: { withRetryAfter: 0, without: 0 } };
  const deadline = Date.now() + (options.deadlineMs ?? 600_000);
  const sendBatch = async (items: number[]): Promise<void> => {
    const body = JSON.stringify({ tasks: items.map((i) => ({ ...options.task(i), body: { item: i }, dedup_key: `item-${i}` })) });
    for (let attempt = 0; ; attempt++) {
      if (attempt > 0) for (const i of items) result.resent.add(i);
      let waitMs = 200;
      try {
        const res = await fetch(`${options.url()}/v1/tasks/batch`, {
          method: 'POST',
          headers: { authorization: `Bearer ${options.apiKey}`, 'content-type': 'application/json' },
          body,
          signal: AbortSignal.timeout(15_000),
        });
        await res.arrayBuffer();
        if (res.status === 201) {
          for (const i of items) result.acked.add(i);
          return;
        }
        const retryAfter = res.headers.get('retry-after');
        if (res.status === 503 || res.status === 429) {
          if (retryAfter) result.refusals.withRetryAfter++;
          else result.refusals.without++;
          waitMs = retryAfter ? Number(retryAfter) * 1_000 : 500;
        } else {
          result.bad.push(`HTTP ${res.status}`);
        }
      } catch (error) {
        // No answer (a killed process, a timeout): the batch may or may not be written.
        waitMs = (error as Error).name === 'TimeoutError' ? 0 : 200;
      }
      if (Date.now() > deadline) throw new Error(`items ${items[0]}…${items.at(-1)} could not be enqueued before the deadline`);
      await new Promise((r) => setTimeout(r, waitMs));
    }
  };
  const done = (async () => {
    const sending: Promise<void>[] = [];
    for (let first = 0; first < options.items; first += options.batch) {
      const items = Array.from({ length: Math.min(options.batch, options.items - first) }, (_, k) => first + k);
      sending.push(sendBatch(items));
      await new Promise((r) => setTimeout(r, options.intervalMs));
    }
    await Promise.all(sending);
    return result;
  })();
  return { done, result };
}
