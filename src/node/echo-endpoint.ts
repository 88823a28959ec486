/**
 * A local push endpoint for trying Sluice: verifies each push's signature against Sluice's
 * JWKS, logs it, and answers 200 with a small JSON result. To try retries and deferrals, the
 * URL can ask for a failure: `?fail=N` answers 500 to the first N attempts, `?retry_after=S`
 * answers the first attempt 429 with `Retry-After: S`.
 */
import { createServer } from 'node:http';
import { createRemoteJWKSet } from 'jose';
import { HEADERS } from '../protocol/headers.ts';
import { verifyPush } from '../protocol/signature.ts';

export interface RunningEndpoint {
  url: string;
  close(): Promise<void>;
}

export async function startEchoEndpoint(options: {
  jwksUrl: string;
  port?: number;
  log?: (line: string) => void;
}): Promise<RunningEndpoint> {
  const keys = createRemoteJWKSet(new URL(options.jwksUrl));
  const log = options.log ?? console.log;
  let base = '';
  /** Pushes seen per task, for `?retry_after` (a deferral keeps the attempt number). */
  const seen = new Map<string, number>();
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = new Uint8Array(Buffer.concat(chunks));
    const taskId = req.headers[HEADERS.taskId.toLowerCase()];
    try {
      await verifyPush({
        token: req.headers[HEADERS.signature.toLowerCase()] as string | undefined,
        keys,
        url: `${base}${req.url}`,
        body,
        nowMs: Date.now(),
      });
      const attempt = Number(req.headers[HEADERS.attempt.toLowerCase()]);
      const ask = new URL(req.url ?? '/', base).searchParams;
      const pushes = (seen.get(String(taskId)) ?? 0) + 1;
      seen.set(String(taskId), pushes);
      const say = (what: string) =>
        log(`echo: task ${taskId} attempt ${attempt}: signature verified, body ${new TextDecoder().decode(body)}: ${what}`);
      if (attempt <= Number(ask.get('fail') ?? 0)) {
        say('answering 500 (?fail)');
        return void res.writeHead(500).end('failing on purpose (?fail)');
      }
      if (ask.has('retry_after') && pushes === 1) {
        say(`answering 429, Retry-After: ${ask.get('retry_after')}`);
        return void res.writeHead(429, { 'retry-after': ask.get('retry_after') ?? '1' }).end();
      }
      say('answering 200');
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ echoed: body.length, at: new Date().toISOString() }));
    } catch (error) {
      log(`echo: task ${taskId}: REJECTED (${(error as Error).message})`);
      res.writeHead(401, { 'content-type': 'text/plain', [HEADERS.retry]: 'false' }).end((error as Error).message);
    }
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return { url: base, close: () => new Promise((resolve) => server.close(() => resolve())) };
}
