/**
 * A push's one HTTP exchange, as the dispatcher needs it: a request of plain values out, and
 * back the status, the few headers the outcome depends on, and at most 64 KiB of the body.
 * Two implementations: `fetchTransport` over any web `fetch` (Workers, Deno, Bun, tests), and
 * on Node `pinnedTransport` (src/node/pinned-transport.ts), which pins the checked address and
 * skips the web Request/Response/stream objects a push never needs (docs/DESIGN.md §3).
 *
 * Failures are thrown as fetch throws them: a timeout as an error named `TimeoutError`; a
 * transport that knows whether a connection was ever made says so in `sent` (push.ts).
 */
import { LIMITS } from '../core/types.ts';
import { HEADERS } from '../protocol/headers.ts';

export interface PushRequest {
  url: string;
  method: string;
  /** Lower-case names. */
  headers: Record<string, string>;
  body: Uint8Array<ArrayBuffer> | null;
  /** The whole exchange, the answer's body included, ends by then. */
  timeoutMs: number;
}

export interface PushAnswer {
  status: number;
  /** Only `KEPT_HEADERS`, lower-case; a header sent more than once is joined with ", " (as fetch's `get`). */
  headers: Record<string, string>;
  /** At most `LIMITS.resultBytes` of the body, decoded as UTF-8. */
  body: string;
}

export type PushTransport = (request: PushRequest) => Promise<PushAnswer>;

/** A request no HTTP client will send as it is (a header value it refuses): it never will be. */
export class UnsendableRequest extends Error {
  override name = 'UnsendableRequest';
}

/** The response headers the outcome depends on (core/outcome.ts). */
export const KEPT_HEADERS: readonly string[] = ['retry-after', HEADERS.retry.toLowerCase(), HEADERS.ack.toLowerCase()];

/** The transport over a web `fetch`: never follows redirects; the timeout covers the body. */
export function fetchTransport(fetcher: typeof fetch): PushTransport {
  return async (request) => {
    let headers: Headers;
    try {
      headers = new Headers(request.headers);
    } catch (error) {
      throw new UnsendableRequest((error as Error).message);
    }
    const response = await fetcher(request.url, {
      method: request.method,
      headers,
      ...(request.body === null ? {} : { body: request.body }),
      redirect: 'manual',
      signal: AbortSignal.timeout(request.timeoutMs),
    });
    const body = await readCapped(response, LIMITS.resultBytes);
    const kept: Record<string, string> = {};
    for (const name of KEPT_HEADERS) {
      const value = response.headers.get(name);
      if (value !== null) kept[name] = value;
    }
    return { status: response.status, headers: kept, body };
  };
}

/** Reads at most `maxBytes` of a response as text and lets the rest go. */
async function readCapped(response: Response, maxBytes: number): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  while (size < maxBytes) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value.subarray(0, maxBytes - size));
    size += Math.min(value.length, maxBytes - size);
  }
  // Not awaited: a cancel settles only once every reader of the body let go (a tee's other branch).
  reader.cancel().catch(() => {});
  return decodeChunks(chunks, size);
}

const decoder = new TextDecoder();

/** The chunks (`size` bytes in all) as UTF-8 text, a sequence cut at the end replaced as fetch's `text()` would. */
export function decodeChunks(chunks: readonly Uint8Array[], size: number): string {
  if (size === 0) return '';
  const all = chunks.length === 1 ? (chunks[0] as Uint8Array) : new Uint8Array(size);
  if (chunks.length > 1) {
    let offset = 0;
    for (const chunk of chunks) {
      all.set(chunk, offset);
      offset += chunk.length;
    }
  }
  return decoder.decode(all);
}
