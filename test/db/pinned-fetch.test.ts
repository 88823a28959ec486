/**
 * The Node push's fetch checks and pins the target's address: a public name that resolves to a
 * private address is refused at push time (DNS rebinding, 127.0.0.1.nip.io), and the connection
 * goes to the address that was checked, with the original Host. A local resolver stands in for
 * DNS; the endpoint is real HTTP.
 */
import type { LookupAddress } from 'node:dns';
import { createServer } from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.ts';
import { taskGet, taskInsertMany } from '../../src/db/tasks.ts';
import { dispatchRun } from '../../src/dispatcher/run.ts';
import { pinnedFetch } from '../../src/node/pinned-fetch.ts';
import { freePort } from '../../src/node/postgres.ts';
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

describe('pinned fetch', () => {
  it('refuses a public name that resolves to a private address: the task is dead, nothing is sent', async () => {
    const fetch = pinnedFetch({
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
    const report = await dispatchRun({ db: t.db, config: { ...config, allowPrivateTargets: false }, keyring, fetch }, { budgetMs: 5_000 });
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
    const fetch = pinnedFetch({ allowPrivate: true, resolve: resolver({ 'pinned.example': [{ address: '127.0.0.1', family: 4 }] }) });
    endpoint.reply(() => ({ status: 201, headers: { 'x-answer': 'yes' }, body: 'made' }));
    const res = await fetch(`http://pinned.example:${port}/in`, {
      method: 'POST',
      headers: { 'x-trace': 'abc' },
      body: new TextEncoder().encode('hi'),
    });
    expect([res.status, res.headers.get('x-answer'), await res.text()]).toEqual([201, 'yes', 'made']);
    const [push] = endpoint.received;
    expect(push).toMatchObject({ method: 'POST', path: '/in', text: 'hi' });
    expect(push!.headers).toMatchObject({ host: `pinned.example:${port}`, 'x-trace': 'abc' });
  });

  it('says when a request cannot have arrived: a failed TLS handshake, no connection within the timeout', async () => {
    const port = new URL(endpoint.url).port;
    const fetch = pinnedFetch({ allowPrivate: true, resolve: resolver({ 'tls.example': [{ address: '127.0.0.1', family: 4 }] }) });
    // https to a plain-HTTP server: the TLS handshake fails before any request is written.
    await expect(fetch(`https://tls.example:${port}/`)).rejects.toMatchObject({ sent: false });
    // A server that accepts TCP but never answers the TLS handshake: the timeout comes first.
    const silent = createServer(() => {});
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    try {
      const silentPort = (silent.address() as { port: number }).port;
      await expect(fetch(`https://tls.example:${silentPort}/`, { signal: AbortSignal.timeout(300) })).rejects.toMatchObject({
        sent: false,
      });
    } finally {
      silent.close();
    }
    expect(endpoint.received).toHaveLength(0);
  });

  it('fails as fetch does: a timeout with the signal reason, a refused connection with its code', async () => {
    const fetch = pinnedFetch({ allowPrivate: true });
    endpoint.reply(() => ({ status: 200, delayMs: 1_000 }));
    await expect(fetch(`${endpoint.url}/slow`, { signal: AbortSignal.timeout(100) })).rejects.toMatchObject({ name: 'TimeoutError' });
    await expect(fetch(`http://127.0.0.1:${await freePort()}/`)).rejects.toMatchObject({ cause: { code: 'ECONNREFUSED' }, sent: false });
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
    const fetch = pinnedFetch({ allowPrivate: true });
    try {
      expect(await (await fetch(url, { method: 'POST', body: new Uint8Array(1) })).text()).toBe('ok');
      // The same push again: the kept-alive connection fails on use, and a new one answers.
      expect(await (await fetch(url, { method: 'POST', body: new Uint8Array(1) })).text()).toBe('ok');
      expect(answered).toEqual([1, 2]);
    } finally {
      fetch.close();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
