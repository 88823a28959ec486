/**
 * A TCP proxy between Sluice and Postgres (node:net) that can cut the network: `drop` resets
 * every connection and refuses new ones until `heal`, as a lost route does; `stall` stops
 * moving bytes both ways and holds new connections unanswered until `heal`, as a partition
 * that heals before TCP gives up does (what was sent meanwhile then arrives).
 */
import { connect, createServer, type Socket } from 'node:net';

export interface TcpProxy {
  port: number;
  /** Resets every connection and refuses new ones; returns how many were cut. */
  drop(): number;
  /** Moves no byte, either way, on any connection, old or new. */
  stall(): void;
  heal(): void;
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  upstream: Socket;
  /** Bytes held while stalled, each way, in order. */
  up: Buffer[];
  down: Buffer[];
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  let mode: 'pass' | 'drop' | 'stall' = 'pass';
  const pairs = new Set<Pair>();
  const held: Socket[] = [];

  const join = (client: Socket) => {
    const upstream = connect(target.port, target.host);
    const pair: Pair = { client, upstream, up: [], down: [] };
    pairs.add(pair);
    client.on('data', (chunk: Buffer) => (mode === 'stall' ? pair.up.push(chunk) : upstream.write(chunk)));
    upstream.on('data', (chunk: Buffer) => (mode === 'stall' ? pair.down.push(chunk) : client.write(chunk)));
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', end);
    upstream.on('close', end);
  };

  const server = createServer((client) => {
    if (mode === 'drop') {
      client.resetAndDestroy();
      return;
    }
    if (mode === 'stall') {
      client.on('error', () => {});
      held.push(client);
      return;
    }
    join(client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as { port: number }).port,
    drop() {
      mode = 'drop';
      const n = pairs.size + held.length;
      for (const pair of pairs) {
        pair.client.resetAndDestroy();
        pair.upstream.destroy();
      }
      pairs.clear();
      for (const s of held.splice(0)) s.resetAndDestroy();
      return n;
    },
    stall() {
      mode = 'stall';
    },
    heal() {
      mode = 'pass';
      for (const pair of pairs) {
        for (const chunk of pair.up.splice(0)) pair.upstream.write(chunk);
        for (const chunk of pair.down.splice(0)) pair.client.write(chunk);
      }
      for (const s of held.splice(0)) if (!s.destroyed) join(s);
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const pair of pairs) {
          pair.client.destroy();
          pair.upstream.destroy();
        }
        for (const s of held.splice(0)) s.destroy();
        server.close(() => resolve());
      }),
  };
}
