/**
 * The push's transport on Node (src/push/transport.ts), with the target's address checked and
 * pinned (docs/DESIGN.md §8): the name is resolved once, every address it resolves to must be
 * public (unless private targets are allowed), and the connection goes to that very address,
 * with the original Host header and TLS server name. So a public name that resolves to a
 * private address (DNS rebinding, names like 127.0.0.1.nip.io) is refused at push time. A
 * Worker's fetch cannot do this.
 *
 * It speaks node:http directly: a push needs a status, three headers and a capped body, and the
 * web Headers, Response and stream objects a fetch builds around them cost as much CPU as the
 * rest of the exchange (measured: bench/compare, "push").
 */
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { LIMITS } from '../core/types.ts';
import { decodeChunks, KEPT_HEADERS, type PushAnswer, type PushRequest, type PushTransport, UnsendableRequest } from '../push/transport.ts';
import { PrivateTargetError, privateAddressReason } from '../security/targets.ts';

type Resolver = (hostname: string, options: { all: true }, callback: (error: Error | null, addresses: LookupAddress[]) => void) => void;

/** Kept-alive connections found closed, one after another, before a push is given up as sent. */
const STALE_RETRIES = 4;

/** How a request on a connection the peer had already closed fails (Node's own advice for reused sockets). */
function isStaleConnection(error: Error): boolean {
  const code = (error as { code?: string }).code;
  return code === 'ECONNRESET' || code === 'EPIPE' || code === 'ECONNABORTED';
}

/** A transport for pushes; `close` drops its kept-alive connections. */
export type PinnedTransport = PushTransport & { close(): void };

export function pinnedTransport(options: { allowPrivate: boolean; resolve?: Resolver }): PinnedTransport {
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

  const transport = (request: PushRequest): Promise<PushAnswer> => {
    const url = new URL(request.url);
    const secure = url.protocol === 'https:';
    const client = secure ? https : http;
    const headers = request.body === null ? request.headers : { ...request.headers, 'content-length': String(request.body.byteLength) };
    return new Promise<PushAnswer>((done, fail) => {
      let settled = false;
      let current: http.ClientRequest | null = null;
      // Whether a connection was made (TCP, and TLS for https): only then can the request have
      // reached the endpoint. A failure before that (refused, TLS certificate, a connect that
      // timed out) is marked `sent: false`, so the push frees its slot at once.
      let connected = false;
      const finish = (error: Error | null, answer?: PushAnswer) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (error) fail(error);
        else done(answer as PushAnswer);
      };
      const timer = setTimeout(() => {
        // As fetch does: a timeout rejects with a TimeoutError, unless nothing was ever
        // connected: then nothing can be running at the endpoint.
        const timeout = new DOMException(`The operation was aborted due to timeout`, 'TimeoutError');
        finish(
          connected
            ? timeout
            : Object.assign(new TypeError('fetch failed'), {
                cause: new Error(`no connection within the push timeout (${String(timeout)})`),
                sent: false,
              }),
        );
        current?.destroy();
      }, request.timeoutMs);
      // A kept-alive connection the endpoint closed while it sat idle fails as soon as it is used
      // (reset, or closed before any answer). The request was then not read: it is sent again
      // on another connection, as HTTP clients do, instead of holding the push's slot until its
      // lease expires (a duplicate, if the endpoint did read it, is what at-least-once allows).
      const send = (staleLeft: number) => {
        let req: http.ClientRequest;
        try {
          req = client.request(url, { method: request.method, headers, lookup, agent: secure ? agents.https : agents.http }, (res) => {
            const status = res.statusCode ?? 0;
            if (status < 200 || status > 599) {
              res.destroy();
              return finish(Object.assign(new TypeError('fetch failed'), { cause: new Error(`invalid HTTP status ${status}`) }));
            }
            const kept: Record<string, string> = {};
            for (const name of KEPT_HEADERS) {
              const values = res.headersDistinct[name];
              if (values) kept[name] = values.join(', ');
            }
            const chunks: Buffer[] = [];
            let size = 0;
            const answer = () => finish(null, { status, headers: kept, body: decodeChunks(chunks, size) });
            res.on('data', (chunk: Buffer) => {
              const part = chunk.subarray(0, LIMITS.resultBytes - size);
              chunks.push(part);
              size += part.length;
              // The rest is not read: the connection goes, as a fetch body cancelled early.
              if (size >= LIMITS.resultBytes) {
                answer();
                res.destroy();
              }
            });
            res.on('end', answer);
            // The connection lost mid-answer: the request did arrive.
            const cut = (error: Error) => finish(Object.assign(new TypeError('fetch failed'), { cause: error, sent: true }));
            res.on('error', cut);
            res.on('close', () => {
              if (!res.complete) cut(new Error('the connection closed before the answer ended'));
            });
          });
        } catch (error) {
          // node:http refuses a header name or value before anything is sent.
          return finish(new UnsendableRequest((error as Error).message));
        }
        current = req;
        req.on('socket', (socket) => {
          const ready = () => {
            connected = true;
          };
          if (!socket.connecting && (!secure || (socket as { encrypted?: boolean }).encrypted)) ready();
          else socket.once(secure ? 'secureConnect' : 'connect', ready);
        });
        req.on('error', (error) => {
          if (settled) return;
          if (error instanceof PrivateTargetError) return finish(error);
          if (req.reusedSocket && staleLeft > 0 && isStaleConnection(error)) return send(staleLeft - 1);
          finish(Object.assign(new TypeError('fetch failed'), { cause: error, sent: connected }));
        });
        req.end(request.body ?? undefined);
      };
      send(STALE_RETRIES);
    });
  };
  return Object.assign(transport, {
    close() {
      agents.http.destroy();
      agents.https.destroy();
    },
  });
}
