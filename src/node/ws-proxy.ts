/**
 * The local stand-in for Neon's proxy, so the Neon serverless driver (inside workerd) reaches a
 * plain local Postgres over both of its transports, as it reaches Neon in production:
 * - WebSocket → TCP at `/v2` (the driver's Pool and Client);
 * - the HTTP query endpoint at `/sql` (the driver's one-shot `neon()` queries and batches),
 *   answering in Neon's format: raw text values with their type ids, errors as 400 + fields.
 * It connects only to the one Postgres address it was started for. Both transports are reached
 * through a delay relay (tcp-delay.ts): at `rttMs` every round trip costs that much, as Neon
 * does from far away; at 0 it is a plain pipe, still counting connections and round trips.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import pg from 'pg';
import { type WebSocket, WebSocketServer } from 'ws';
import { type FrontendMessage, FrontendReader } from './pg-frontend.ts';
import { startTcpDelay } from './tcp-delay.ts';

export interface ProxyOptions {
  /** The round trip to the database: every chunk held rttMs/2 each way, on both transports. Default 0. */
  rttMs?: number;
  /** Told of each WebSocket opened and closed, each Postgres frontend message on it, and each /sql request. */
  trace?: (event: ProxyTrace) => void;
  /** Tests: a fault made between the driver and Postgres. */
  fault?: ProxyFault;
}

/**
 * A fault between the driver and Postgres (test/helpers/lost-answer.ts loses the answer to a
 * statement that committed). `connection` is asked for a tap per WebSocket: it is told of each
 * frontend message, and says of Postgres's bytes whether to pass them on, hold them back, or
 * cut the connection. `answerLost` is asked once a /sql request has run: `true` cuts the
 * connection instead of answering.
 */
export interface ProxyFault {
  connection(): { sent(message: FrontendMessage): void; received(data: Buffer): 'pass' | 'hold' | 'cut' };
  answerLost(texts: readonly string[]): boolean;
}

export type ProxyTrace =
  | { at: number; transport: 'ws'; conn: number; event: 'open' | 'close' }
  | { at: number; transport: 'ws'; conn: number; event: 'message'; type: string; text?: string }
  | { at: number; transport: 'sql'; event: 'request'; texts: string[] };

/** What went through the stand-in since it started. */
export interface ProxyStats {
  /** TCP connections to the stand-in: WebSockets, and HTTP connections for /sql. */
  connections: number;
  /** Round trips through the stand-in, summed over its connections (tcp-delay.ts). */
  roundTrips: number;
  webSockets: number;
  sqlRequests: number;
  /** Postgres frontend messages on the WebSockets, by type byte (`startup` for the first). */
  messages: Record<string, number>;
}

export interface RunningProxy {
  /** The value for `SLUICE_NEON_WS_PROXY`: `host:port/v2`; the HTTP endpoint is `/sql` beside it. */
  address: string;
  /** Cuts every open connection at once, as a network fault would (tests); new ones still work. Returns how many it cut. */
  cut(): number;
  /** The database suspends (tcp-delay.ts `suspend`): every connection is cut, new ones held `holdMs`. */
  suspend(holdMs: number): number;
  stats(): ProxyStats;
  close(): Promise<void>;
}

export async function startWsProxy(target: { host: string; port: number }, options: ProxyOptions = {}): Promise<RunningProxy> {
  const trace = options.trace;
  const counts = { webSockets: 0, sqlRequests: 0, messages: {} as Record<string, number> };
  const allowed = new Set([`${target.host}:${target.port}`, `localhost:${target.port}`]);
  const sockets = new Set<Socket>();
  const pools = new Map<string, pg.Pool>();
  const server = createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/sql') {
      counts.sqlRequests++;
      void serveSql(req, res, allowed, pools, trace, options.fault);
    } else res.writeHead(404).end();
  });
  const wss = new WebSocketServer({ server, path: '/v2' });
  wss.on('connection', (ws: WebSocket, req) => {
    const address = new URL(req.url ?? '', 'http://proxy').searchParams.get('address');
    // The driver asks for the host of DATABASE_URL; only the local Postgres is served.
    if (!address || !allowed.has(address)) {
      ws.close(1008, 'address not allowed');
      return;
    }
    const socket = connect(target.port, target.host);
    sockets.add(socket);
    const conn = ++counts.webSockets;
    const reader = new FrontendReader();
    trace?.({ at: Date.now(), transport: 'ws', conn, event: 'open' });
    ws.on('close', () => trace?.({ at: Date.now(), transport: 'ws', conn, event: 'close' }));
    const pending: Buffer[] = [];
    const tap = options.fault?.connection();
    socket.on('connect', () => {
      for (const chunk of pending.splice(0)) socket.write(chunk);
    });
    ws.on('message', (data: Buffer) => {
      for (const m of reader.read(data)) {
        counts.messages[m.type] = (counts.messages[m.type] ?? 0) + 1;
        trace?.({ at: Date.now(), transport: 'ws', conn, event: 'message', ...m });
        tap?.sent(m);
      }
      if (socket.connecting) pending.push(data);
      else socket.write(data);
    });
    socket.on('data', (data) => {
      const verdict = tap?.received(data) ?? 'pass';
      if (verdict === 'cut') {
        socket.destroy();
        ws.terminate();
      } else if (verdict === 'pass' && ws.readyState === ws.OPEN) ws.send(data);
    });
    socket.on('close', () => {
      sockets.delete(socket);
      ws.close();
    });
    socket.on('error', () => ws.close());
    ws.on('close', () => socket.destroy());
    ws.on('error', () => socket.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
    server.listen(0, '127.0.0.1');
  });
  const { port } = server.address() as { port: number };
  const relay = await startTcpDelay({ host: '127.0.0.1', port }, options.rttMs ?? 0);
  const cut = () => {
    const n = sockets.size + pools.size;
    for (const s of sockets) s.destroy();
    for (const client of wss.clients) client.terminate();
    for (const pool of pools.values()) void pool.end();
    pools.clear();
    return n;
  };
  return {
    address: `127.0.0.1:${relay.port}/v2`,
    stats() {
      const { connections, roundTrips } = relay.stats();
      return { connections, roundTrips, ...counts, messages: { ...counts.messages } };
    },
    cut,
    suspend(holdMs) {
      relay.suspend(holdMs);
      return cut();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        for (const client of wss.clients) client.terminate();
        for (const pool of pools.values()) void pool.end();
        wss.close();
        server.closeAllConnections();
        void relay.close();
        server.close(() => resolve());
      }),
  };
}

interface SqlQuery {
  query: string;
  params: unknown[];
}

/** Values as Postgres sends them in text form: the driver parses them by type id, as with Neon. */
const RAW = { getTypeParser: () => (value: string) => value };
const ERROR_FIELDS = ['severity', 'code', 'detail', 'hint', 'position', 'where', 'schema', 'table', 'column', 'dataType', 'constraint'];

async function serveSql(
  req: IncomingMessage,
  res: ServerResponse,
  allowed: Set<string>,
  pools: Map<string, pg.Pool>,
  trace: ProxyOptions['trace'],
  fault: ProxyFault | undefined,
): Promise<void> {
  const answer = (status: number, body: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };
  const connectionString = String(req.headers['neon-connection-string'] ?? '');
  let url: URL;
  try {
    url = new URL(connectionString);
  } catch {
    return answer(400, { message: 'Neon-Connection-String is missing or not a URL' });
  }
  if (!allowed.has(`${url.hostname}:${url.port || 5432}`)) return answer(400, { message: 'address not allowed' });
  let pool = pools.get(connectionString);
  if (!pool) {
    pool = new pg.Pool({ connectionString, max: 10 });
    pool.on('error', () => {});
    pools.set(connectionString, pool);
  }
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  let body: SqlQuery | { queries: SqlQuery[] };
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    return answer(400, { message: 'the body is not JSON' });
  }
  trace?.({
    at: Date.now(),
    transport: 'sql',
    event: 'request',
    texts: 'queries' in body ? body.queries.map((q) => q.query) : [body.query],
  });
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    return answer(400, { message: `cannot connect: ${(error as Error).message}`, code: (error as { code?: string }).code ?? '08006' });
  }
  const run = async (q: SqlQuery) => {
    const r = await client.query({ text: q.query, values: q.params, rowMode: 'array', types: RAW });
    return {
      command: r.command,
      rowCount: r.rowCount,
      fields: r.fields.map((f) => ({ name: f.name, dataTypeID: f.dataTypeID })),
      rows: r.rows,
    };
  };
  try {
    const queries = 'queries' in body ? body.queries : [body];
    let result: unknown;
    if ('queries' in body) {
      // A batch is one transaction, as Neon runs it.
      await client.query('begin');
      const results = [];
      for (const q of body.queries) results.push(await run(q));
      await client.query('commit');
      result = { results };
    } else {
      result = await run(body);
    }
    client.release();
    if (fault?.answerLost(queries.map((q) => q.query))) res.destroy();
    else answer(200, result);
  } catch (error) {
    if ('queries' in body) await client.query('rollback').catch(() => {});
    client.release();
    const e = error as Record<string, unknown>;
    answer(400, {
      message: String(e.message),
      ...Object.fromEntries(ERROR_FIELDS.filter((f) => e[f] !== undefined).map((f) => [f, e[f]])),
    });
  }
}
