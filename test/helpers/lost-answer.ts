/**
 * The lost answer: a statement runs and commits, and the connection is cut before the client
 * hears so. Armed for the next statement whose text matches; Postgres's bytes for it are held
 * back until its ReadyForQuery (sent only after the commit), then the connection is cut. On the
 * Worker path it plugs into the Neon stand-in (src/node/ws-proxy.ts, both transports); on Node
 * a TCP proxy in front of Postgres carries it.
 */
import { connect, createServer, type Socket } from 'node:net';
import { FrontendReader } from '../../src/node/pg-frontend.ts';
import type { ProxyFault } from '../../src/node/ws-proxy.ts';

export interface LostAnswers extends ProxyFault {
  /** Loses the answer to the next statement (or /sql request) whose text matches. */
  arm(match: RegExp): void;
  /** Answers lost so far. */
  readonly lost: number;
}

export function lostAnswers(): LostAnswers {
  const armed: RegExp[] = [];
  let lost = 0;
  const take = (texts: readonly string[]): boolean => {
    const i = armed.findIndex((m) => texts.some((t) => m.test(t)));
    if (i < 0) return false;
    armed.splice(i, 1);
    return true;
  };
  return {
    arm: (match) => void armed.push(match),
    get lost() {
      return lost;
    },
    answerLost(texts) {
      if (!take(texts)) return false;
      lost++;
      return true;
    },
    connection() {
      // From the matching message on, Postgres's bytes are held until its first ReadyForQuery.
      let losing: Buffer | null = null;
      return {
        sent(message) {
          if (losing === null && message.text !== undefined && take([message.text])) losing = Buffer.alloc(0);
        },
        received(data) {
          if (losing === null) return 'pass';
          losing = Buffer.concat([losing, data]);
          for (let at = 0; at + 5 <= losing.length; at += 1 + losing.readInt32BE(at + 1)) {
            if (losing[at] === 0x5a /* Z */ && at + 1 + losing.readInt32BE(at + 1) <= losing.length) {
              lost++;
              return 'cut';
            }
          }
          return 'hold';
        },
      };
    },
  };
}

/** A TCP proxy to Postgres that carries `fault` (the Node path's connections). */
export async function startLossyProxy(
  target: { host: string; port: number },
  fault: ProxyFault,
): Promise<{ port: number; close(): Promise<void> }> {
  const open = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    const reader = new FrontendReader();
    const tap = fault.connection();
    open.add(client).add(upstream);
    client.on('data', (chunk: Buffer) => {
      for (const m of reader.read(chunk)) tap.sent(m);
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      const verdict = tap.received(chunk);
      if (verdict === 'cut') end();
      else if (verdict === 'pass') client.write(chunk);
    });
    const end = () => {
      open.delete(client);
      open.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}
