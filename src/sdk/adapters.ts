/**
 * Receivers for frameworks that do not hand over a web `Request`: Express (and any Node
 * `http` server), Fastify and AWS Lambda. Each turns the framework's request into a `Request`
 * with the exact body bytes that arrived, runs the one handler (`createHandler`: verification,
 * answers, lease mode), and writes its `Response` back. Web-standard runtimes (Workers, Bun,
 * Deno, Hono, Next.js App Router route handlers) take `createHandler`'s function as it is.
 * Typed by shape, so the SDK depends on none of these frameworks.
 */

import { fromBase64 } from '../protocol/encoding.ts';
import { createHandler, type HandlerOptions, type TaskFunction } from './handler.ts';

/** What an Express or `node:http` request is, for a receiver: its head, and its body unread or raw. */
export interface NodeRequestLike extends AsyncIterable<Uint8Array> {
  method?: string | undefined;
  url?: string | undefined;
  originalUrl?: string;
  headers: Record<string, string | string[] | undefined>;
  /** Set by a body parser: a raw one (`express.raw()`) leaves the bytes; a JSON one would not. */
  body?: unknown;
  /** Express's (`http` or `https`, as `trust proxy` lets it read); else the socket says. */
  protocol?: string;
  socket?: object;
}

export interface NodeResponseLike {
  statusCode: number;
  setHeader(name: string, value: string | string[]): unknown;
  end(body?: Uint8Array): unknown;
}

/**
 * A handler for Express (`app.post('/hook', sluiceExpress(fn, options))`) or a `node:http`
 * server. Mount it before any body parser but `express.raw()`: a push is verified against the
 * bytes that arrived, never a parsed and re-serialised body (a JSON parser's body is refused).
 * Lease mode's background work runs on in the process.
 */
export function sluiceExpress<R>(fn: TaskFunction<R>, options: HandlerOptions) {
  const handle = createHandler(fn, options);
  return async (req: NodeRequestLike, res: NodeResponseLike, next?: (error?: unknown) => void): Promise<void> => {
    try {
      const body = await rawBody(req);
      const request = new Request(nodeUrl(req), {
        method: req.method ?? 'POST',
        headers: nodeHeaders(req.headers),
        body: body as BodyInit,
      });
      await writeNode(res, await handle(request));
    } catch (error) {
      if (next) next(error);
      else {
        res.statusCode = 500;
        res.end(new TextEncoder().encode(error instanceof Error ? error.message : String(error)));
      }
    }
  };
}

/**
 * A Fastify plugin that serves pushes on `path` (POST): `app.register(sluiceFastify(fn, { path:
 * '/hook', ...options }))`. Inside its own scope it takes every body as raw bytes, so the
 * app's JSON parsing elsewhere is untouched and the push is verified as it arrived.
 */
export function sluiceFastify<R>(fn: TaskFunction<R>, options: HandlerOptions & { path: string }) {
  const handle = createHandler(fn, options);
  return async (scope: FastifyScopeLike): Promise<void> => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
    scope.post(options.path, async (request, reply) => {
      const body = request.body instanceof Uint8Array ? request.body : new Uint8Array();
      const url = `${request.protocol}://${request.host}${request.url}`;
      const response = await handle(new Request(url, { method: 'POST', headers: nodeHeaders(request.headers), body: body as BodyInit }));
      reply.code(response.status);
      response.headers.forEach((value, name) => {
        reply.header(name, value);
      });
      return reply.send(new Uint8Array(await response.arrayBuffer()));
    });
  };
}

/** The parts of a Fastify instance the plugin uses. */
export interface FastifyScopeLike {
  removeAllContentTypeParsers(): void;
  addContentTypeParser(
    type: string,
    options: { parseAs: 'buffer' },
    parser: (request: unknown, body: Uint8Array, done: (error: Error | null, body?: unknown) => void) => void,
  ): void;
  post(
    path: string,
    handler: (
      request: { body: unknown; headers: Record<string, string | string[] | undefined>; url: string; protocol: string; host: string },
      reply: { code(status: number): unknown; header(name: string, value: string): unknown; send(body: Uint8Array): unknown },
    ) => Promise<unknown>,
  ): void;
}

/** An API Gateway HTTP API (payload 2.0) or Lambda function URL event, or a REST API (1.0) one. */
export interface LambdaEvent {
  version?: string;
  rawPath?: string;
  rawQueryString?: string;
  path?: string;
  httpMethod?: string;
  requestContext?: { domainName?: string; http?: { method?: string } };
  headers?: Record<string, string | undefined> | null;
  queryStringParameters?: Record<string, string | undefined> | null;
  body?: string | null;
  isBase64Encoded?: boolean;
}

export interface LambdaResult {
  statusCode: number;
  headers: Record<string, string>;
  body: string;
  isBase64Encoded: boolean;
}

/**
 * An AWS Lambda handler behind a function URL or API Gateway: `export const handler =
 * sluiceLambda(fn, options)`. The URL checked against the signature is `https://<domain><path>`
 * (give `url` when a custom domain or a stage prefix makes it another). Respond mode only: a
 * Lambda is frozen once it answers, so a lease cannot be held after the answer.
 */
export function sluiceLambda<R>(fn: TaskFunction<R>, options: HandlerOptions) {
  if (options.mode === 'lease') throw new Error('sluiceLambda: lease mode needs work after the answer, which Lambda freezes');
  const handle = createHandler(fn, options);
  return async (event: LambdaEvent): Promise<LambdaResult> => {
    const headers = new Headers();
    for (const [name, value] of Object.entries(event.headers ?? {})) if (value !== undefined) headers.set(name, value);
    const host = event.requestContext?.domainName ?? headers.get('host') ?? 'localhost';
    const query =
      event.rawQueryString ??
      new URLSearchParams(
        Object.entries(event.queryStringParameters ?? {}).filter((e): e is [string, string] => e[1] !== undefined),
      ).toString();
    const url = `https://${host}${event.rawPath ?? event.path ?? '/'}${query ? `?${query}` : ''}`;
    const body =
      event.body == null ? new Uint8Array() : event.isBase64Encoded ? fromBase64(event.body) : new TextEncoder().encode(event.body);
    const method = event.requestContext?.http?.method ?? event.httpMethod ?? 'POST';
    const response = await handle(new Request(url, { method, headers, body: body as BodyInit }));
    return {
      statusCode: response.status,
      headers: Object.fromEntries(response.headers),
      body: await response.text(),
      isBase64Encoded: false,
    };
  };
}

async function rawBody(req: NodeRequestLike): Promise<Uint8Array> {
  if (req.body instanceof Uint8Array) return req.body;
  if (req.body !== undefined && !(typeof req.body === 'object' && req.body !== null && Object.keys(req.body).length === 0)) {
    throw new Error('sluiceExpress: the body was parsed before it (a JSON parser?): mount it first, or use express.raw()');
  }
  const chunks: Uint8Array[] = [];
  for await (const chunk of req) chunks.push(chunk);
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

function nodeUrl(req: NodeRequestLike): string {
  const host = String(req.headers.host ?? 'localhost');
  const tls = req.socket !== undefined && 'encrypted' in req.socket && req.socket.encrypted === true;
  return `${req.protocol ?? (tls ? 'https' : 'http')}://${host}${req.originalUrl ?? req.url ?? '/'}`;
}

function nodeHeaders(headers: Record<string, string | string[] | undefined>): Headers {
  const out = new Headers();
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) out.append(name, v);
  }
  return out;
}

async function writeNode(res: NodeResponseLike, response: Response): Promise<void> {
  res.statusCode = response.status;
  response.headers.forEach((value, name) => {
    res.setHeader(name, value);
  });
  res.end(new Uint8Array(await response.arrayBuffer()));
}
