/**
 * A local push endpoint for trying Sluice: verifies each push's signature against Sluice's
 * JWKS, logs it, and answers 200 with a small JSON result.
 */
import { createServer } from 'node:http';
import { createRemoteJWKSet } from 'jose';
import { HEADERS } from '../sdk/protocol/headers.ts';
import { verifyPush } from '../sdk/protocol/signature.ts';

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
      log(
        `echo: task ${taskId} attempt ${req.headers[HEADERS.attempt.toLowerCase()]}: signature verified, body ${new TextDecoder().decode(body)}`,
      );
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
