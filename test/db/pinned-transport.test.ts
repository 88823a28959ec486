/**
 * The Node push's transport checks and pins the target's address: a public name that resolves to a
 * private address is refused at push time (DNS rebinding, 127.0.0.1.nip.io), and the connection
 * goes to the address that was checked, with the original Host. A local resolver stands in for
 * DNS; the endpoint is real HTTP.
 */
import type { LookupAddress } from 'node:dns';
import { createServer, type Socket } from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { taskGet } from '../../src/db/tasks.ts';
import { dispatchRun } from '../../src/dispatcher/run.ts';
import { pinnedTransport } from '../../src/node/pinned-transport.ts';
import { freePort } from '../../src/node/postgres.ts';
import { fetchTransport, type PushRequest, type PushTransport } from '../../src/push/transport.ts';
import type { Keyring } from '../../src/security/keyring.ts';
import type { TestDatabase } from '../helpers/db.ts';
import type { TestEndpoint } from '../helpers/endpoint.ts';
import { useDispatchFixture } from '../helpers/fixture.ts';
import { newTask } from '../helpers/tasks.ts';

const f = useDispatchFixture();
let t: TestDatabase;
let endpoint: TestEndpoint;
let config: Config;
let keyring: Keyring;
beforeAll(() => {
  ({ t, endpoint, config, keyring } = f);
});

/** A resolver that knows a few names, as a hostile or local DNS would answer. */
const resolver =
  (answers: Record<string, LookupAddress[]>) =>
  (host: string, _options: { all: true }, callback: (error: Error | null, addresses: LookupAddress[]) => void) =>
    answers[host] ? callback(null, answers[host]) : callback(Object.assign(new Error(`no such host ${host}`), { code: 'ENOTFOUND' }), []);

/** A request as a push makes it: a POST of a few bytes unless said otherwise, 5 s to answer. */
const request = (url: string, more: Partial<PushRequest> = {}): PushRequest => ({
  url,
  method: 'POST',
  headers: {},
  body: new Uint8Array(1),
  timeoutMs: 5_000,
  ...more,
});

describe('pinned transport', () => {
  it('refuses a public name that resolves to a private address: the task is dead, nothing is sent', async () => {
    const transport = pinnedTransport({
      allowPrivate: false,
      resolve: resolver({
        'rebind.example': [{ address: '127.0.0.1', family: 4 }],
        'mapped.example': [
          { address: '93.184.216.34', family: 4 },
          { address: '::ffff:10.0.0.1', family: 6 },
        ],
      }),
    });
    const tasks = await taskInsertMany(t.db, [
      newTask({ url: 'https://rebind.example/hook' }),
      newTask({ url: 'https://mapped.example/hook' }),
    ]);
    const report = await dispatchRun(
      { db: t.db, config: { ...config, allowPrivateTargets: false }, keyring, transport },
      { budgetMs: 5_000 },
    );
    expect(report).toMatchObject({ claimed: 2, dead: 2 });
    expect(endpoint.received).toHaveLength(0);
    expect(await taskGet(t.db, tasks[0]!.task.id)).toMatchObject({
      status: 'dead',
      lastError: expect.stringMatching(/resolves to 127\.0\.0\.1/),
    });
    expect(await taskGet(t.db, tasks[1]!.task.id)).toMatchObject({
      status: 'dead',
      lastError: expect.stringMatching(/::ffff:10\.0\.0\.1/),
    });
  });

  it('connects to the address it checked, with the original Host, body and headers', async () => {
    const port = new URL(endpoint.url).port;
    const transport = pinnedTransport({
      allowPrivate: true,
      resolve: resolver({ 'pinned.example': [{ address: '127.0.0.1', family: 4 }] }),
    });
    endpoint.reply(() => ({ status: 201, headers: { 'x-answer': 'yes', 'sluice-ack': 'lease' }, body: 'made' }));
    const answer = await transport(
      request(`http://pinned.example:${port}/in`, { headers: { 'x-trace': 'abc' }, body: new TextEncoder().encode('hi') }),
    );
    // Of the answer's headers, only those a push's outcome reads are kept.
    expect(answer).toEqual({ status: 201, headers: { 'sluice-ack': 'lease' }, body: 'made' });
    const [push] = endpoint.received;
    expect(push).toMatchObject({ method: 'POST', path: '/in', text: 'hi' });
    expect(push!.headers).toMatchObject({ host: `pinned.example:${port}`, 'x-trace': 'abc' });
  });

  it('says when a request cannot have arrived: a failed TLS handshake, no connection within the timeout', async () => {
    const port = new URL(endpoint.url).port;
    const transport = pinnedTransport({ allowPrivate: true, resolve: resolver({ 'tls.example': [{ address: '127.0.0.1', family: 4 }] }) });
    // https to a plain-HTTP server: the TLS handshake fails before any request is written.
    await expect(transport(request(`https://tls.example:${port}/`))).rejects.toMatchObject({ sent: false });
    // A server that accepts TCP but never answers the TLS handshake: the timeout comes first.
    const silent = createServer(() => {});
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    try {
      const silentPort = (silent.address() as { port: number }).port;
      await expect(transport(request(`https://tls.example:${silentPort}/`, { timeoutMs: 300 }))).rejects.toMatchObject({ sent: false });
    } finally {
      silent.close();
    }
    expect(endpoint.received).toHaveLength(0);
  });

  it('fails as fetch does: a timeout as a TimeoutError, a refused connection with its code', async () => {
    const transport = pinnedTransport({ allowPrivate: true });
    endpoint.reply(() => ({ status: 200, delayMs: 1_000 }));
    await expect(transport(request(`${endpoint.url}/slow`, { timeoutMs: 100 }))).rejects.toMatchObject({ name: 'TimeoutError' });
    await expect(transport(request(`http://127.0.0.1:${await freePort()}/`))).rejects.toMatchObject({
      cause: { code: 'ECONNREFUSED' },
      sent: false,
    });
  });

  it('sends again on another connection when a kept-alive one was closed by the endpoint meanwhile', async () => {
    // An endpoint that answers the first request of a connection and keeps it open, then closes
    // it without answering when it is used again: an idle connection it had already given up on.
    const answered: number[] = [];
    let connections = 0;
    const server = createServer((socket) => {
      const n = ++connections;
      let requests = 0;
      socket.on('data', () => {
        if (++requests > 1) return socket.destroy();
        answered.push(n);
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/`;
    const transport = pinnedTransport({ allowPrivate: true });
    try {
      expect((await transport(request(url))).body).toBe('ok');
      // The same push again: the kept-alive connection fails on use, and a new one answers.
      expect((await transport(request(url))).body).toBe('ok');
      expect(answered).toEqual([1, 2]);
    } finally {
      transport.close();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});

describe.each([
  ['pinned transport (Node)', () => pinnedTransport({ allowPrivate: true })],
  ['fetch transport (Workers, Deno, Bun)', () => Object.assign(fetchTransport(fetch), { close() {} })],
] satisfies Array<[string, () => PushTransport & { close(): void }]>)('%s', (_name, make) => {
  it('reads at most 64 KiB of an answer, joins a repeated header as fetch does, and refuses a header it cannot send', async () => {
    const transport = make();
    const sockets = new Set<Socket>();
    const server = createServer((socket) => {
      sockets.add(socket);
      socket.once('data', () => {
        const body = 'x'.repeat(100_000);
        socket.end(`HTTP/1.1 503 Busy\r\nRetry-After: 1\r\nRetry-After: 2\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const answer = await transport(request(`http://127.0.0.1:${(server.address() as { port: number }).port}/`));
      expect([answer.status, answer.headers, answer.body.length]).toEqual([503, { 'retry-after': '1, 2' }, 64 * 1024]);
      await expect(transport(request(endpoint.url, { headers: { 'x-bad': 'a\nb' } }))).rejects.toMatchObject({ name: 'UnsendableRequest' });
      expect(endpoint.received).toHaveLength(0);
    } finally {
      transport.close();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
