/**
 * A database at a distance, for development and benchmarks only: a TCP relay that holds every
 * chunk for RTT/2 in each direction, in order, so each round trip through it costs one RTT.
 * The Neon stand-in (ws-proxy.ts) sits behind one, as Neon's proxy sits far from a Worker; the
 * Node server reaches Postgres through one. TCP and TLS handshakes are not modelled: a new
 * connection costs the round trips of what it says (a WebSocket upgrade, Postgres's startup).
 */
import { connect, createServer, type Socket } from 'node:net';

export interface DelayStats {
  /** Connections accepted. */
  connections: number;
  /** Round trips: bursts the client sent after an answer (or first), summed over connections. */
  roundTrips: number;
  chunksIn: number;
  chunksOut: number;
}

export interface RunningDelay {
  host: string;
  port: number;
  stats(): DelayStats;
  /** Cuts every open connection at once, as a network fault would (tests); new ones still work. Returns how many it cut. */
  cut(): number;
  /**
   * The database suspends, as Neon's compute does when idle: every open connection is cut, and
   * new ones are held for `holdMs` (it resuming) before they reach it. Returns how many it cut.
   */
  suspend(holdMs: number): number;
  close(): Promise<void>;
}

/** An RTT for the local databases: a whole number of milliseconds, 0 to 10,000. */
export function parseRttMs(name: string, value: string | undefined): number {
  if (value === undefined || value.trim() === '') return 0;
  const ms = Number(value);
  if (!Number.isInteger(ms) || ms < 0 || ms > 10_000) {
    throw new RangeError(`${name} must be a whole number of milliseconds from 0 to 10000 (got ${JSON.stringify(value)})`);
  }
  return ms;
}

/**
 * Delivers chunks `delayMs` after they were handed in, in the order they were. At 0 it
 * delivers at once, in the same turn: the relay is then a plain pipe.
 */
export class DelayLine {
  #queue: Array<{ at: number; run: () => void }> = [];
  #timer: ReturnType<typeof setTimeout> | null = null;
  #delayMs: number;

  constructor(delayMs: number) {
    this.#delayMs = delayMs;
  }

  /** Runs `fn` once everything handed in before it has run, and `delayMs` after now. */
  push(fn: () => void): void {
    if (this.#delayMs <= 0 && this.#queue.length === 0) {
      fn();
      return;
    }
    this.#queue.push({ at: performance.now() + this.#delayMs, run: fn });
    this.#schedule();
  }

  clear(): void {
    this.#queue = [];
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  #schedule(): void {
    if (this.#timer || this.#queue.length === 0) return;
    const wait = Math.max(0, Math.ceil((this.#queue[0]?.at ?? 0) - performance.now()));
    this.#timer = setTimeout(() => {
      this.#timer = null;
      const now = performance.now();
      while (this.#queue.length > 0 && (this.#queue[0]?.at ?? 0) <= now) this.#queue.shift()?.run();
      this.#schedule();
    }, wait);
  }
}

/**
 * A relay to `target` on 127.0.0.1 and a port of its own; each round trip through it costs `rttMs`.
 * `onClientData`: told of each chunk a client sends, with its connection's number (a trace).
 */
export async function startTcpDelay(
  target: { host: string; port: number },
  rttMs: number,
  onClientData?: (conn: number, chunk: Buffer) => void,
): Promise<RunningDelay> {
  const sockets = new Set<Socket>();
  const stats: DelayStats = { connections: 0, roundTrips: 0, chunksIn: 0, chunksOut: 0 };
  // No Nagle: a small chunk held back for an ACK would cost a delayed ACK's 40 ms on top.
  /** Until when new connections are held (a suspended database resuming); epoch ms. */
  let resumesAt = 0;
  const server = createServer({ noDelay: true }, (client) => {
    const held = resumesAt - Date.now();
    if (held <= 0) {
      relay(client);
      return;
    }
    // Its bytes wait in the socket until the database has resumed.
    client.pause();
    sockets.add(client);
    const timer = setTimeout(() => {
      client.off('close', gone);
      relay(client);
      client.resume();
    }, held);
    const gone = () => {
      clearTimeout(timer);
      sockets.delete(client);
    };
    client.once('close', gone);
  });
  const relay = (client: Socket) => {
    const conn = ++stats.connections;
    const upstream = connect({ port: target.port, host: target.host, noDelay: true });
    sockets.add(client).add(upstream);
    const toServer = new DelayLine(rttMs / 2);
    const toClient = new DelayLine(rttMs / 2);
    let answered = true;
    client.on('data', (chunk) => {
      stats.chunksIn++;
      onClientData?.(conn, chunk);
      if (answered) stats.roundTrips++;
      answered = false;
      toServer.push(() => upstream.write(chunk));
    });
    upstream.on('data', (chunk) => {
      stats.chunksOut++;
      answered = true;
      toClient.push(() => client.write(chunk));
    });
    // An end travels behind the data before it, as a FIN does.
    client.on('end', () => toServer.push(() => upstream.end()));
    upstream.on('end', () => toClient.push(() => client.end()));
    const drop = () => {
      toServer.clear();
      toClient.clear();
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop);
    upstream.on('error', drop);
    client.on('close', () => toServer.push(drop));
    upstream.on('close', () => toClient.push(drop));
  };
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as { port: number };
  const cut = () => {
    const open = [...sockets];
    for (const s of open) s.destroy();
    // Each connection is two sockets: the client's and the upstream's.
    return Math.ceil(open.length / 2);
  };
  return {
    host: '127.0.0.1',
    port,
    stats: () => ({ ...stats }),
    cut,
    suspend(holdMs) {
      resumesAt = Date.now() + holdMs;
      return cut();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
