/**
 * `sluice listen --queue Q --forward-to URL`: a pull consumer that hands each task to a handler
 * on this machine as the push Sluice would send it (signed for that URL, with the lease's
 * headers), and relays the handler's answer as the dispatcher would take it
 * (core/outcome.ts `classifyPush`): a 2xx completes the task, `Sluice-Ack: lease` leaves the
 * lease to the handler's own calls, a 429/503 with Retry-After gives the task back for then,
 * anything else fails it. So a handler written for pushes runs unchanged against a deployed queue.
 */

import { classifyPush } from '../../core/outcome.ts';
import { doublingBackoffMs } from '../../core/retry.ts';
import { storable, truncate } from '../../core/text.ts';
import { LIMITS } from '../../core/types.ts';
import { utf8 } from '../../protocol/encoding.ts';
import type { HttpMethod } from '../../protocol/wire.ts';
import { exchange } from '../../push/push.ts';
import { fetchTransport } from '../../push/transport.ts';
import { intFlag, stringFlag } from '../args.ts';
import type { Command, Context } from '../context.ts';
import { seg } from '../context.ts';
import { ApiError, UnreachableError, UsageError } from '../errors.ts';
import { time } from '../output.ts';
import { sleep, transient } from '../polling.ts';

/** A pulled task as POST /v1/queues/:queue/lease answers it with `push_to`. */
interface Pulled {
  id: string;
  attempt: number;
  lease: { id: string; token: string; expires_at: string };
  push: { url: string; method: HttpMethod; headers: Record<string, string>; body_text: string | null };
}

/** GET /v1/webhooks/forwarding: what verifies the pushes forwarded to a URL. */
interface Forwarding {
  issuer: string;
  jwks_url: string;
  webhook_secret: string | null;
}

/**
 * How long an idle pull waits for a task. Ctrl-C lets a pull under way finish (and gives back what
 * it brings) rather than cut it: a server need not notice a consumer that left mid-poll (Miniflare
 * does not; Workers do with enable_request_signal, Node does), and would lease a task for nobody.
 * So this is also the longest Ctrl-C takes.
 */
const WAIT_MS = 2_000;
/** Time kept between a forward's deadline and its lease's end, for the lease call after it. */
const LEASE_MARGIN_MS = 1_000;
/** How long pulling pauses after the handler could not be reached. */
const HANDLER_DOWN_PAUSE_MS = 2_000;

export const listen: Command = {
  words: ['listen'],
  args: [],
  flags: [
    { name: 'queue', value: 'QUEUE', help: 'the pull queue to consume', required: true },
    { name: 'forward-to', value: 'URL', help: 'the handler each task is pushed to, e.g. http://localhost:3000/api/task', required: true },
    { name: 'parallel', value: 'N', help: 'tasks forwarded at once (the queue’s limits still apply). Default: 1' },
  ],
  summary: 'consume a pull queue, forwarding each task to a local handler as a signed push, until Ctrl-C',
  details: [
    'Develop a handler on your machine against a deployed (or local) Sluice: make the queue a pull',
    'queue (`sluice queues set QUEUE --pull true`), then run this with a key that has tasks:pull.',
    'Each task arrives at the handler as Sluice would push it, with its lease headers, signed for the',
    '--forward-to URL as a forwarded push: with keys, an issuer (sluice-forward) and a Standard Webhooks',
    'secret of its own, which production receivers refuse. The SDK’s receiver takes it when made with',
    '`acceptForwarded: true` (and Sluice’s URL for the keys); the start prints what else to trust.',
    '--forward-to must be on this machine (127.0.0.0/8, [::1], localhost) unless the API key lists its',
    'origin in `forward_to`.',
    '',
    'The handler’s answer is relayed as the dispatcher takes a push’s: 2xx completes the task (its body',
    'is the result); 2xx with `Sluice-Ack: lease` leaves the lease to the handler, which heartbeats and',
    'completes it with the lease token as after any push; 429 or 503 with Retry-After gives the task',
    'back until then, without using an attempt; any other answer fails the attempt (retried unless',
    '`Sluice-Retry: false`). A handler that does not answer before the lease ends keeps its slot until',
    'the lease expires. One that cannot be reached (nothing listening) gets the task given back unused,',
    'and pulling pauses 2 s. Each task prints a line: time, task, attempt, answer, what was done.',
    '',
    `Uses POST /v1/queues/QUEUE/lease (long polls of ${WAIT_MS / 1_000} s) and the lease calls. Ctrl-C lets a pull under`,
    'way finish, gives back every task not yet answered (POST /v1/leases/LEASE/release), and exits 0.',
  ].join('\n'),
  async run(context, parsed) {
    const forwardTo = stringFlag(parsed, 'forward-to')!;
    if (!URL.canParse(forwardTo) || !/^https?:$/.test(new URL(forwardTo).protocol)) {
      throw new UsageError(`--forward-to must be an http or https URL, not ${JSON.stringify(forwardTo)}`);
    }
    await new Listener(context, stringFlag(parsed, 'queue')!, forwardTo, intFlag(parsed, 'parallel', { min: 1, max: 100 }) ?? 1).run();
  },
};

class Listener {
  readonly #c: Context;
  readonly #queue: string;
  readonly #forwardTo: string;
  readonly #parallel: number;
  /** Tasks pulled and not yet answered for: what Ctrl-C gives back. */
  readonly #open = new Map<string, Pulled>();
  readonly #running = new Set<Promise<void>>();
  /** Set when the handler could not be reached: pulling waits for it. */
  #pause: Promise<void> | null = null;

  constructor(context: Context, queue: string, forwardTo: string, parallel: number) {
    this.#c = context;
    this.#queue = queue;
    this.#forwardTo = forwardTo;
    this.#parallel = parallel;
  }

  async run(): Promise<void> {
    const { api, out, signal } = this.#c;
    // Pulls go out on a signal Ctrl-C does not abort (see WAIT_MS), within --timeout, never
    // shorter than a long poll: one cut short might lease tasks for nobody.
    const puller = api.detached(Math.max(api.timeoutMs, WAIT_MS + 5_000));
    // What the handler must trust: forwarded pushes are no production pushes (security/forwarding.ts).
    const trust = await api.get<Forwarding>(`/v1/webhooks/forwarding?url=${encodeURIComponent(this.#forwardTo)}`);
    out.note(`listening on queue ${this.#queue}, forwarding to ${this.#forwardTo} (Ctrl-C to stop)`);
    out.event(
      { forward_to: this.#forwardTo, issuer: trust.issuer, jwks_url: trust.jwks_url, webhook_secret: trust.webhook_secret },
      [
        `forwarded pushes are signed by issuer "${trust.issuer}" with the keys at ${trust.jwks_url}:`,
        "  the SDK's receiver takes them with acceptForwarded: true (development only)",
        ...(trust.webhook_secret ? [`  Standard Webhooks secret of forwarded pushes to this endpoint: ${trust.webhook_secret}`] : []),
      ].join('\n'),
    );
    let failures = 0;
    try {
      while (!signal.aborted) {
        if (this.#running.size >= this.#parallel) {
          await Promise.race(this.#running);
          continue;
        }
        if (this.#pause) {
          await this.#pause;
          this.#pause = null;
          continue;
        }
        let tasks: Pulled[];
        try {
          ({ tasks } = await puller.post<{ tasks: Pulled[] }>(`/v1/queues/${seg(this.#queue)}/lease`, {
            max: this.#parallel - this.#running.size,
            wait_ms: WAIT_MS,
            push_to: this.#forwardTo,
          }));
          failures = 0;
        } catch (error) {
          if (signal.aborted) break;
          if (!transient(error)) throw error;
          out.warn(error, 'pulling again shortly');
          await sleep(doublingBackoffMs(++failures, 500, 10_000), signal);
          continue;
        }
        for (const task of tasks) this.#open.set(task.lease.id, task);
        // Told to stop while the pull was under way: what it brought is given back below.
        if (signal.aborted) break;
        for (const task of tasks) {
          const work = this.#forward(task).finally(() => this.#running.delete(work));
          this.#running.add(work);
        }
      }
    } finally {
      await this.#giveBack();
    }
  }

  /** Pushes one task to the handler, then ends its lease as the handler's answer says. */
  async #forward(task: Pulled): Promise<void> {
    const { out, signal } = this.#c;
    // The lease is ended on a signal of its own: a Ctrl-C meanwhile must not lose the answer.
    const api = this.#c.api.detached();
    const started = Date.now();
    const leaseLeftMs = Date.parse(task.lease.expires_at) - Date.now() - LEASE_MARGIN_MS;
    // The exchange a pusher makes (src/push/push.ts), which Ctrl-C cuts short too.
    const result = await exchange(
      {
        url: task.push.url,
        method: task.push.method,
        headers: task.push.headers,
        body: task.push.body_text === null ? null : utf8(task.push.body_text),
        timeoutMs: Math.max(1, leaseLeftMs),
      },
      fetchTransport((input, init) => fetch(input, { ...init, signal: AbortSignal.any([init?.signal ?? signal, signal]) })),
      () => Date.now() - started,
    );
    // Ctrl-C cut the exchange short: the lease is given back by `run`. An answer the handler
    // gave all the same is relayed (on the detached client), not thrown away.
    if (signal.aborted && result.kind !== 'response') return;
    // The handler is not there (not started yet, restarting): the task goes back unused, and
    // pulling pauses a moment, rather than each task spending an attempt on it.
    if (result.kind === 'network' && !result.sent) {
      this.#pause = sleep(HANDLER_DOWN_PAUSE_MS, signal);
      try {
        await api.lease(task.lease.id, task.lease.token, 'release', {});
        this.#open.delete(task.lease.id);
        out.event(
          { task_id: task.id, attempt: task.attempt, answer: 'unreachable', outcome: 'released' },
          `task ${task.id}: the handler cannot be reached at ${task.push.url}: given back`,
        );
      } catch (e) {
        if (!(e instanceof ApiError || e instanceof UnreachableError)) throw e;
        out.warn(e, `task ${task.id} left to its lease`);
      }
      return;
    }
    // Answered (or let go): from here the lease is the handler's, or ended below, not ours to give back.
    this.#open.delete(task.lease.id);
    const outcome = classifyPush(result, Date.now());
    const answer = result.kind === 'response' ? `${result.status}` : result.kind === 'timeout' ? 'no answer in time' : 'connection failed';
    let done: string;
    try {
      switch (outcome.type) {
        case 'succeeded':
          await api.lease(
            task.lease.id,
            task.lease.token,
            'complete',
            outcome.result === null ? {} : { result: cut(storable(outcome.result)) },
          );
          done = 'completed';
          break;
        case 'lease_kept':
          done = 'the handler keeps the lease';
          break;
        case 'deferred':
          await api.lease(task.lease.id, task.lease.token, 'release', { delay_ms: outcome.delayMs });
          done = `given back for ${outcome.delayMs} ms (Retry-After)`;
          break;
        case 'failed':
          await api.lease(task.lease.id, task.lease.token, 'fail', {
            error: storable(truncate(outcome.error, LIMITS.errorChars)),
            retry: outcome.retryable,
          });
          done = outcome.retryable ? 'failed: retried' : 'failed: not retried (Sluice-Retry: false)';
          break;
        case 'unanswered':
          done = `${outcome.error}: the slot is held until the lease ends`;
          break;
      }
    } catch (error) {
      if (!(error instanceof ApiError || error instanceof UnreachableError)) throw error;
      out.warn(error, `task ${task.id} left to its lease`);
      return;
    }
    const ms = Date.now() - started;
    out.event(
      {
        task_id: task.id,
        attempt: task.attempt,
        answer: result.kind === 'response' ? result.status : result.kind,
        outcome: outcome.type,
        ms,
      },
      `${time(new Date().toISOString())}  task ${task.id} attempt ${task.attempt}  → ${answer} (${ms} ms): ${done}`,
    );
  }

  /** Ctrl-C: stop, and give back what was pulled and not answered for, at no cost of an attempt. */
  async #giveBack(): Promise<void> {
    const { api, out } = this.#c;
    await Promise.allSettled(this.#running);
    const open = [...this.#open.values()];
    // The command's own signal is aborted: the calls go out on a fresh client's.
    const results = await Promise.allSettled(open.map((t) => api.detached().lease(t.lease.id, t.lease.token, 'release', {})));
    const failed = results.filter((r) => r.status === 'rejected').length;
    if (open.length > 0) {
      out.event(
        { gave_back: open.length - failed, left_to_lease: failed },
        `gave back ${open.length - failed} task${open.length === 1 ? '' : 's'}${failed ? ` (${failed} left to their leases)` : ''}`,
      );
    }
  }
}

/** At most a result's limit of `text` in UTF-8 bytes, never splitting a character. */
function cut(text: string): string {
  const { read } = new TextEncoder().encodeInto(text, new Uint8Array(LIMITS.resultBytes));
  return text.slice(0, read);
}
