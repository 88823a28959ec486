/**
 * The CLI's HTTP client: Sluice's API over web-standard `fetch`, each failure turned into the
 * error (and so the exit code) a script can act on. No retries: a command says what happened
 * and the caller decides (`tail` retries by itself).
 */
import { ApiError, CliError, type FieldIssue, stoppedExit, UnreachableError } from './errors.ts';
import type { Stop } from './runtime.ts';

/** The command was told to stop (Ctrl-C, SIGTERM, a closed stdout) while a request was in flight. */
export class Interrupted extends CliError {
  override name = 'Interrupted';
  readonly why: Stop;
  readonly exitCode: number;
  constructor(why: Stop) {
    super(why === 'SIGTERM' ? 'terminated' : 'interrupted');
    this.why = why;
    this.exitCode = stoppedExit(why);
  }
  problem() {
    return { code: 'interrupted', detail: this.message };
  }
}

export interface ApiOptions {
  /** Sluice's base URL, without a trailing slash. */
  url: string;
  apiKey: string;
  timeoutMs: number;
  /** Aborted on Ctrl-C, SIGTERM or a closed stdout, with the `Stop` as its reason. */
  signal: AbortSignal;
}

export class Api {
  readonly #options: ApiOptions;

  constructor(options: ApiOptions) {
    this.#options = options;
  }

  /**
   * The same client on a signal of its own, for calls that must go out after the command was
   * told to stop (`listen` giving back its tasks), within `timeoutMs`.
   */
  detached(timeoutMs = 5_000): Api {
    return new Api({ ...this.#options, timeoutMs, signal: new AbortController().signal });
  }

  /** How long a request may take (--timeout). */
  get timeoutMs(): number {
    return this.#options.timeoutMs;
  }

  get<T>(path: string): Promise<T> {
    return this.request('GET', path);
  }

  post<T>(path: string, body?: unknown): Promise<T> {
    return this.request('POST', path, body);
  }

  put<T>(path: string, body: unknown): Promise<T> {
    return this.request('PUT', path, body);
  }

  delete<T>(path: string): Promise<T> {
    return this.request('DELETE', path);
  }

  /** A lease call, authorized by the lease's token instead of the key (`sluice listen`). */
  lease<T>(leaseId: string, token: string, call: 'complete' | 'fail' | 'release', body: unknown): Promise<T> {
    return this.request('POST', `/v1/leases/${encodeURIComponent(leaseId)}/${call}`, body, token);
  }

  /** The answer's JSON (`null` for 204), or an `ApiError` / `UnreachableError` / `Interrupted`. */
  async request<T>(method: string, path: string, body?: unknown, token?: string): Promise<T> {
    const { response, text, where } = await this.#send(method, path, body, token);
    if (response.status === 204) return null as T;
    const data = parseJson(text);
    if (data === undefined) throw new UnreachableError(`the answer from ${where} is not JSON: is ${this.#options.url} a Sluice?`);
    return data as T;
  }

  /** A GET whose answer is text (GET /metrics). */
  async text(path: string): Promise<string> {
    return (await this.#send('GET', path)).text;
  }

  /** Sends one request; a 2xx answer with its text, else the error it comes to. */
  async #send(method: string, path: string, body?: unknown, token?: string): Promise<{ response: Response; text: string; where: string }> {
    const { url, apiKey, timeoutMs, signal } = this.#options;
    const where = `${url}${path.split('?')[0]}`;
    let response: Response;
    let text: string;
    try {
      response = await fetch(`${url}${path}`, {
        method,
        headers: { authorization: `Bearer ${token ?? apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        // A redirect would carry the key elsewhere: say where it points instead.
        redirect: 'manual',
        signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]),
      });
      text = await response.text();
    } catch (error) {
      if (signal.aborted) throw new Interrupted(signal.reason as Stop);
      if ((error as Error).name === 'TimeoutError') throw new UnreachableError(`no answer from ${where} within ${timeoutMs} ms`);
      throw new UnreachableError(`cannot reach Sluice at ${url}: ${networkReason(error)}`);
    }
    if (response.status >= 300 && response.status < 400) {
      const location = response.headers.get('location') ?? '(no Location)';
      throw new UnreachableError(`${where} answered ${response.status}, redirecting to ${location}: give that URL instead`);
    }
    if (!response.ok) {
      const problem = (parseJson(text) ?? {}) as { code?: unknown; detail?: unknown; issues?: unknown };
      const retryAfter = response.headers.get('retry-after');
      throw new ApiError(
        response.status,
        typeof problem.code === 'string' ? problem.code : 'http_error',
        typeof problem.detail === 'string' ? problem.detail : text.slice(0, 200) || response.statusText,
        Array.isArray(problem.issues) ? (problem.issues as FieldIssue[]) : [],
        retryAfter !== null && /^\d+$/.test(retryAfter) ? Number(retryAfter) : null,
      );
    }
    return { response, text, where };
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Node puts the socket's error in `cause` ("connect ECONNREFUSED 127.0.0.1:1"); Bun and Deno in the message. */
function networkReason(error: unknown): string {
  const cause = (error as { cause?: { message?: string } }).cause;
  return cause?.message ?? (error as Error).message ?? String(error);
}
