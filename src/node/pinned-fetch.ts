/**
 * The push's fetch on Node, with the target's address checked and pinned (docs/DESIGN.md §8): the
 * name is resolved once, every address it resolves to must be public (unless private targets
 * are allowed), and the connection goes to that very address, with the original Host header and
 * TLS server name. So a public name that resolves to a private address (DNS rebinding, names
 * like 127.0.0.1.nip.io) is refused at push time. A Worker's fetch cannot do this.
 */
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { Readable } from 'node:stream';
import { PrivateTargetError, privateAddressReason } from '../security/targets.ts';

type Resolver = (hostname: string, options: { all: true }, callback: (error: Error | null, addresses: LookupAddress[]) => void) => void;

/** Kept-alive connections found closed, one after another, before a push is given up as sent. */
const STALE_RETRIES = 4;

/** How a request on a connection the peer had already closed fails (Node's own advice for reused sockets). */
function isStaleConnection(error: Error): boolean {
  const code = (error as { code?: string }).code;
  return code === 'ECONNRESET' || code === 'EPIPE' || code === 'ECONNABORTED';
}

/** A fetch for pushes; `close` drops its kept-alive connections. */
export type PinnedFetch = typeof fetch & { close(): void };

export function pinnedFetch(options: { allowPrivate: boolean; resolve?: Resolver }): PinnedFetch {
  const resolve: Resolver = options.resolve ?? ((host, opts, cb) => dnsLookup(host, opts, cb));
  const lookup: LookupFunction = (hostname: string, lookupOptions: LookupOptions, callback) => {
    resolve(hostname, { all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      const refused = options.allowPrivate ? undefined : addresses.find((a) => privateAddressReason(a.address) !== null);
      if (refused) {
        const why = privateAddressReason(refused.address);
        return callback(new PrivateTargetError(`${hostname} resolves to ${refused.address}, ${why}, which is refused`), '', 0);
      }
      const wanted =
        lookupOptions.family === 4 || lookupOptions.family === 6 ? addresses.filter((a) => a.family === lookupOptions.family) : addresses;
      if (wanted.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 0);
      if (lookupOptions.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, wanted);
      callback(null, wanted[0]!.address, wanted[0]!.family);
    });
  };

  // Connections are kept alive and reused: each was opened to an address checked when it was.
  const agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

  const pinned = (async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const secure = url.protocol === 'https:';
    const client = secure ? https : http;
    const headers: Record<string, string> = {};
    (init.headers instanceof Headers ? init.headers : new Headers(init.headers)).forEach((value, name) => {
      headers[name] = value;
    });
    // Pushes hand over their bytes as they are; any other body is read through a Response.
    const body =
      init.body === undefined || init.body === null
        ? null
        : init.body instanceof Uint8Array
          ? init.body
          : new Uint8Array(await new Response(init.body).arrayBuffer());
    if (body) headers['content-length'] = String(body.byteLength);
    // A kept-alive connection the endpoint closed while it sat idle fails as soon as it is used
    // (reset, or closed before any answer). The request was then not read: it is sent again on
    // another connection, as HTTP clients do, instead of holding the push's slot until its lease
    // expires (a duplicate, if the endpoint did read it, is what at-least-once allows).
    const send = (staleLeft: number) =>
      new Promise<Response>((done, fail) => {
        const request = client.request(
          url,
          {
            method: init.method ?? 'GET',
            headers,
            lookup,
            ...(init.signal ? { signal: init.signal } : {}),
            agent: secure ? agents.https : agents.http,
          },
          (res) => {
            const out = new Headers();
            for (const [name, value] of Object.entries(res.headers)) {
              for (const v of Array.isArray(value) ? value : value === undefined ? [] : [value]) out.append(name, v);
            }
            const status = res.statusCode ?? 0;
            if (status < 200 || status > 599) {
              res.destroy();
              return fail(Object.assign(new TypeError('fetch failed'), { cause: new Error(`invalid HTTP status ${status}`) }));
            }
            const noBody = [204, 205, 304].includes(status) || init.method === 'HEAD';
            if (noBody) res.resume();
            done(new Response(noBody ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), { status, headers: out }));
          },
        );
        // Whether the connection was made (TCP, and TLS for https): only then can the request
        // have reached the endpoint. A failure before that (refused, TLS certificate, a connect
        // that timed out) is marked `sent: false`, so the push frees its slot at once.
        let connected = false;
        request.on('socket', (socket) => {
          const ready = () => {
            connected = true;
          };
          if (!socket.connecting && (!secure || (socket as { encrypted?: boolean }).encrypted)) ready();
          else socket.once(secure ? 'secureConnect' : 'connect', ready);
        });
        request.on('error', (error) => {
          if (error instanceof PrivateTargetError) return fail(error);
          if (request.reusedSocket && staleLeft > 0 && !init.signal?.aborted && isStaleConnection(error)) {
            return send(staleLeft - 1).then(done, fail);
          }
          // As fetch does: an abort rejects with the signal's reason (a TimeoutError for a timeout),
          // unless nothing was ever connected: then nothing can be running at the endpoint.
          if (init.signal?.aborted && connected) return fail(init.signal.reason);
          const cause = init.signal?.aborted ? new Error(`no connection within the push timeout (${String(init.signal.reason)})`) : error;
          fail(Object.assign(new TypeError('fetch failed'), { cause, sent: connected }));
        });
        request.end(body ?? undefined);
      });
    return send(STALE_RETRIES);
  }) as typeof fetch;
  return Object.assign(pinned, {
    close() {
      agents.http.destroy();
      agents.https.destroy();
    },
  });
}
