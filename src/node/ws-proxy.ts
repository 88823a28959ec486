/**
 * A WebSocket→TCP proxy, so the Neon serverless driver (inside workerd) can reach a plain
 * local Postgres, as Neon's own proxy does in production. It connects only to the one
 * Postgres address it was started for.
 */
import { connect, type Socket } from 'node:net';
import { type WebSocket, WebSocketServer } from 'ws';

export interface RunningProxy {
  /** The value for `SLUICE_NEON_WS_PROXY`. */
  address: string;
  close(): Promise<void>;
}

export async function startWsProxy(target: { host: string; port: number }): Promise<RunningProxy> {
  const allowed = `${target.host}:${target.port}`;
  const sockets = new Set<Socket>();
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, path: '/v2' });
  wss.on('connection', (ws: WebSocket, req) => {
    const address = new URL(req.url ?? '', 'http://proxy').searchParams.get('address');
    // The driver asks for the host of DATABASE_URL; only the local Postgres is served.
    if (address !== allowed && address !== `localhost:${target.port}`) {
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
    wss.once('listening', resolve);
    wss.once('error', reject);
  });
  const { port } = wss.address() as { port: number };
  return {
    address: `127.0.0.1:${port}/v2`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        for (const client of wss.clients) client.terminate();
        wss.close(() => resolve());
      }),
  };
}
