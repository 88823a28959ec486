/**
 * A real HTTP endpoint on 127.0.0.1 that receives pushes: it records every request and
 * answers with whatever the test's handler returns.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';

export interface ReceivedPush {
  method: string;
  path: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Uint8Array<ArrayBuffer>;
  text: string;
  receivedAt: number;
}

export interface Reply {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  /** Wait this long before answering. */
  delayMs?: number;
}

export interface TestEndpoint {
  url: string;
  received: ReceivedPush[];
  /** Sets how the endpoint answers from now on. */
  reply(handler: (push: ReceivedPush) => Reply | Promise<Reply>): void;
  /** Resolves when `n` pushes have arrived in all. */
  waitFor(n: number, timeoutMs?: number): Promise<ReceivedPush[]>;
  close(): Promise<void>;
}

export async function startEndpoint(): Promise<TestEndpoint> {
  const received: ReceivedPush[] = [];
  let handler: (push: ReceivedPush) => Reply | Promise<Reply> = () => ({ status: 200, body: 'ok' });
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  let base = '';
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of req) chunks.push(chunk as Buffer);
    } catch {
      // The sender went away before its body arrived (a killed dispatcher): nothing arrived.
      return;
    }
    const body = new Uint8Array(Buffer.concat(chunks));
    const push: ReceivedPush = {
      method: req.method ?? '',
      path: req.url ?? '',
      url: `${base}${req.url}`,
      headers: req.headers,
      body,
      text: new TextDecoder().decode(body),
      receivedAt: Date.now(),
    };
    received.push(push);
    for (const w of waiters.filter((w) => received.length >= w.n)) w.resolve();
    const reply = await handler(push);
    if (reply.delayMs) await new Promise((r) => setTimeout(r, reply.delayMs));
    if (res.destroyed) return;
    res.writeHead(reply.status ?? 200, reply.headers ?? {}).end(reply.body ?? '');
  });
  server.keepAliveTimeout = 1;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url: base,
    received,
    reply(h) {
      handler = h;
    },
    waitFor(n, timeoutMs = 10_000) {
      if (received.length >= n) return Promise.resolve(received);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`only ${received.length} of ${n} pushes arrived in ${timeoutMs} ms`)), timeoutMs);
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(timer);
            resolve(received);
          },
        });
      });
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
