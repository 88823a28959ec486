/**
 * The Sluice API client. Web-standard `fetch` only: runs on Node ≥ 22, Bun, Deno and Workers
 * (not in browsers: the API sends no CORS headers).
 */

import type {
  EnqueuedRef,
  EnqueuedTask,
  EnqueueRequest,
  PulledTask,
  PullRequest,
  RedriveRequest,
  RedriveResult,
  TaskDetail,
  TaskList,
  TaskStatus,
  TaskView,
} from '../protocol/wire.ts';
import type { ConcurrencyView, EndpointView, QueueSettingsPatch, QueueView } from '../protocol/wire-queues.ts';
import { SluiceApiError } from './errors.ts';

export interface ClientOptions {
  /** Sluice's base URL, e.g. `https://sluice.example.workers.dev`. */
  baseUrl: string;
  /** An API key (`sk_sluice_…`). */
  apiKey: string;
  /** Tries after a network error, a 429 or a 5xx, with exponential backoff and jitter. Default 3. */
  retries?: number;
  /** First backoff delay in ms (doubled per try). Default 200. */
  backoffMs?: number;
  /** A `fetch` to use instead of the global one. */
  fetch?: typeof fetch;
}

export interface ListFilter {
  queue?: string;
  status?: TaskStatus;
  concurrency_key?: string;
  limit?: number;
  cursor?: string;
}

export class SluiceClient {
  readonly #base: string;
  readonly #apiKey: string;
  readonly #retries: number;
  readonly #backoffMs: number;
  readonly #fetch: typeof fetch;

  constructor(options: ClientOptions) {
    this.#base = options.baseUrl.replace(/\/+$/, '');
    this.#apiKey = options.apiKey;
    this.#retries = options.retries ?? 3;
    this.#backoffMs = options.backoffMs ?? 200;
    this.#fetch = options.fetch ?? ((input, init) => fetch(input, init));
  }

  /**
   * Enqueues one task. A retry after a network error may enqueue it twice unless it has a
   * `dedup_key`: give one to tasks that must not run twice (and a `dedup_ttl_ms` to keep the key
   * after the task finished, for a retry that comes after it ran). With `group` instead of `url`:
   * one task per URL of the endpoint group, all or none, answered `{ tasks }`.
   */
  enqueue(task: EnqueueRequest & { group: string }): Promise<{ tasks: EnqueuedTask[] }>;
  enqueue(task: EnqueueRequest): Promise<EnqueuedTask>;
  enqueue(task: EnqueueRequest): Promise<EnqueuedTask | { tasks: EnqueuedTask[] }> {
    return this.#request('POST', '/v1/tasks', task);
  }

  /**
   * Enqueues up to 1,000 tasks, all or nothing. With `{ minimal: true }` each comes back as its
   * id, queue and status only: the bulk path, lighter for the server and the wire.
   */
  async enqueueBatch(tasks: EnqueueRequest[]): Promise<EnqueuedTask[]>;
  async enqueueBatch(tasks: EnqueueRequest[], options: { minimal: true }): Promise<EnqueuedRef[]>;
  async enqueueBatch(tasks: EnqueueRequest[], options: { minimal?: boolean } = {}): Promise<EnqueuedTask[] | EnqueuedRef[]> {
    const headers: Record<string, string> = options.minimal ? { prefer: 'return=minimal' } : {};
    return (await this.#request<{ tasks: EnqueuedTask[] }>('POST', '/v1/tasks/batch', { tasks }, headers)).tasks;
  }

  get(id: string): Promise<TaskDetail> {
    return this.#request('GET', `/v1/tasks/${encodeURIComponent(id)}`);
  }

  list(filter: ListFilter = {}): Promise<TaskList> {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(filter)) if (v !== undefined) query.set(k, String(v));
    const qs = query.toString();
    return this.#request('GET', `/v1/tasks${qs ? `?${qs}` : ''}`);
  }

  cancel(id: string): Promise<TaskView> {
    return this.#request('POST', `/v1/tasks/${encodeURIComponent(id)}/cancel`);
  }

  /** Redrives a dead task. */
  retry(id: string): Promise<TaskView> {
    return this.#request('POST', `/v1/tasks/${encodeURIComponent(id)}/retry`);
  }

  /**
   * Redrives the dead tasks that match (`queue`, `url_prefix`, died `since`/`until`), or counts
   * them with `dry_run: true`. One call examines at most 10,000: while the answer says `more`,
   * call again with `after: last_id`. A retry after a lost answer redrives nothing twice (a task
   * redriven is no longer dead).
   */
  redrive(request: RedriveRequest = {}): Promise<RedriveResult> {
    return this.#request('POST', '/v1/tasks/redrive', request);
  }

  /**
   * Leases up to `max` ready tasks of a pull queue (a key with `tasks:pull`), waiting up to
   * `wait_ms` for one; each is then held as after a push that kept its lease: heartbeat and
   * complete, fail or release it with `lease.token`. Not retried: a lost answer's leases expire.
   */
  async pull(queue: string, request: PullRequest = {}): Promise<PulledTask[]> {
    const answer = await this.#request<{ tasks: PulledTask[] }>(
      'POST',
      `/v1/queues/${encodeURIComponent(queue)}/lease`,
      request,
      {},
      false,
    );
    return answer.tasks;
  }

  /** Queue settings and run-time limits (writes need an `admin` key). */
  readonly queues = {
    list: async (): Promise<QueueView[]> => (await this.#request<{ queues: QueueView[] }>('GET', '/v1/queues')).queues,
    get: (queue: string): Promise<QueueView> => this.#request('GET', `/v1/queues/${encodeURIComponent(queue)}`),
    update: (queue: string, patch: QueueSettingsPatch): Promise<QueueView> =>
      this.#request('PUT', `/v1/queues/${encodeURIComponent(queue)}`, patch),
    reset: (queue: string): Promise<QueueView> => this.#request('DELETE', `/v1/queues/${encodeURIComponent(queue)}`),
    pause: (queue: string): Promise<QueueView> => this.#request('POST', `/v1/queues/${encodeURIComponent(queue)}/pause`),
    resume: (queue: string): Promise<QueueView> => this.#request('POST', `/v1/queues/${encodeURIComponent(queue)}/resume`),
    setKeyLimit: (queue: string, key: string, limit: number): Promise<unknown> =>
      this.#request('PUT', `/v1/queues/${encodeURIComponent(queue)}/keys/${encodeURIComponent(key)}`, { limit }),
    deleteKeyLimit: (queue: string, key: string): Promise<unknown> =>
      this.#request('DELETE', `/v1/queues/${encodeURIComponent(queue)}/keys/${encodeURIComponent(key)}`),
    concurrency: (queue: string): Promise<ConcurrencyView> => this.#request('GET', `/v1/queues/${encodeURIComponent(queue)}/concurrency`),
  };

  /**
   * Endpoint origins and their health (a key of every queue); a pause or resume by hand needs an
   * `admin` key. An origin is scheme, host and port: `https://example.com`.
   */
  readonly endpoints = {
    list: async (): Promise<EndpointView[]> => (await this.#request<{ endpoints: EndpointView[] }>('GET', '/v1/endpoints')).endpoints,
    pause: (origin: string): Promise<EndpointView> => this.#request('POST', `/v1/endpoints/${encodeURIComponent(origin)}/pause`),
    resume: (origin: string): Promise<EndpointView> => this.#request('POST', `/v1/endpoints/${encodeURIComponent(origin)}/resume`),
  };

  async #request<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}, retries = true): Promise<T> {
    const most = retries ? this.#retries : 0;
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await this.#fetch(`${this.#base}${path}`, {
          method,
          headers: {
            ...headers,
            authorization: `Bearer ${this.#apiKey}`,
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
      } catch (error) {
        if (attempt >= most) throw error;
        await this.#pause(attempt, null);
        continue;
      }
      if ((response.status === 429 || response.status >= 500) && attempt < most) {
        await response.body?.cancel();
        await this.#pause(attempt, response.headers.get('retry-after'));
        continue;
      }
      const text = await response.text();
      let data: Record<string, unknown> = {};
      try {
        data = text ? (JSON.parse(text) as Record<string, unknown>) : {};
      } catch {
        // Not JSON (a proxy's error page, say): the status says enough.
        data = { detail: text.slice(0, 200) };
      }
      if (!response.ok) {
        throw new SluiceApiError(
          response.status,
          String(data.code ?? 'error'),
          String(data.detail ?? response.statusText),
          (data.issues as SluiceApiError['issues']) ?? [],
        );
      }
      return data as T;
    }
  }

  #pause(attempt: number, retryAfter: string | null): Promise<void> {
    const seconds = retryAfter !== null && /^\d+$/.test(retryAfter) ? Number(retryAfter) : null;
    // Honour Retry-After up to a minute; beyond that, give up waiting sooner and try again.
    const ms = seconds !== null ? Math.min(seconds, 60) * 1000 : Math.random() * this.#backoffMs * 2 ** attempt;
    return new Promise((resolve) => setTimeout(resolve, ms));
  }
}
