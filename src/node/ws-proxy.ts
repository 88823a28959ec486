/**
 * The local stand-in for Neon's proxy, so the Neon serverless driver (inside workerd) reaches a
 * plain local Postgres over both of its transports, as it reaches Neon in production:
 * - WebSocket → TCP at `/v2` (the driver's Pool and Client);
 * - the HTTP query endpoint at `/sql` (the driver's one-shot `neon()` queries and batches),
 *   answering in Neon's format: raw text values with their type ids, errors as 400 + fields.
 * It connects only to the one Postgres address it was started for.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import pg from 'pg';
import { type WebSocket, WebSocketServer } from 'ws';

export interface RunningProxy {
  /** The value for `SLUICE_NEON_WS_PROXY`: `host:port/v2`; the HTTP endpoint is `/sql` beside it. */
  address: string;
  /** Cuts every open connection at once, as a network fault would (tests); new ones still work. Returns how many it cut. */
  cut(): number;
  close(): Promise<void>;
}

export async function startWsProxy(target: { host: string; port: number }): Promise<RunningProxy> {
  const allowed = new Set([`${target.host}:${target.port}`, `localhost:${target.port}`]);
  const sockets = new Set<Socket>();
  const pools = new Map<string, pg.Pool>();
  const server = createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/sql') void serveSql(req, res, allowed, pools);
    else res.writeHead(404).end();
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
    const pending: Buffer[] = [];
    socket.on('connect', () => {
      for (const chunk of pending.splice(0)) socket.write(chunk);
    });
    ws.on('message', (data: Buffer) => {
      if (socket.connecting) pending.push(data);
      else socket.write(data);
    });
    socket.on('data', (data) => ws.readyState === ws.OPEN && ws.send(data));
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
  return {
    address: `127.0.0.1:${port}/v2`,
    cut() {
      const n = sockets.size + pools.size;
      for (const s of sockets) s.destroy();
      for (const client of wss.clients) client.terminate();
      for (const pool of pools.values()) void pool.end();
      pools.clear();
      return n;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        for (const client of wss.clients) client.terminate();
        for (const pool of pools.values()) void pool.end();
        wss.close();
        server.closeAllConnections();
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

async function serveSql(req: IncomingMessage, res: ServerResponse, allowed: Set<string>, pools: Map<string, pg.Pool>): Promise<void> {
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
    if ('queries' in body) {
      // A batch is one transaction, as Neon runs it.
      await client.query('begin');
      const results = [];
      for (const q of body.queries) results.push(await run(q));
      await client.query('commit');
      answer(200, { results });
    } else {
      answer(200, await run(body));
    }
    client.release();
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
