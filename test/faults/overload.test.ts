/**
 * Enqueue under overload (`npm run test:soak` bursts 3,000 concurrent batch enqueues at one
 * server): every client must get an answer, 201 or 503 with Retry-After. With Node's default
 * listen backlog (511) the kernel overran its accept queue during such a burst and reset 5–7%
 * of the connections before Sluice could answer them (ListenOverflows, EstabResets). The server
 * now asks for a queue as deep as the kernel allows; this checks the listening socket has it.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { makeSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';

let t: TestDatabase;
let sluice: NodeSluice;
beforeAll(async () => {
  t = await createTestDatabase();
  sluice = await startNodeSluice({ env: testEnv(await makeSecrets(), t.url), dispatch: false });
});
afterAll(async () => {
  await sluice?.close();
  await t?.drop();
});

describe('a burst of connections', () => {
  it('is queued by the kernel up to its limit (net.core.somaxconn), not reset past 511', async () => {
    const port = new URL(sluice.url).port;
    // For a listening socket, ss's Send-Q is the accept queue's size.
    const { stdout } = await promisify(execFile)('ss', ['-ltnH', `sport = :${port}`]);
    const backlog = Number(stdout.trim().split(/\s+/)[2]);
    const somaxconn = Number(await readFile('/proc/sys/net/core/somaxconn', 'utf8'));
    expect(backlog).toBe(Math.min(4_096, somaxconn));
    expect(backlog).toBeGreaterThan(511);
  });
});
