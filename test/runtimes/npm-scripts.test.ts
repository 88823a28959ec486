/**
 * `npm run serve` as an operator runs it: npm starts the server through a shell, and a stop
 * sent to npm (SIGTERM to its pid, as a process manager sends it) must stop the server too,
 * gracefully, not leave it running without its parent (issue 21).
 */
import { execFileSync } from 'node:child_process';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/node/postgres.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { spawnReady } from '../helpers/process.ts';

let t: TestDatabase;
let secrets: TestSecrets;
/** Marks this test's servers on their command line, so that one left running can be found. */
const MARK = `--sluice-test-${crypto.randomUUID()}`;

beforeAll(async () => {
  [t, secrets] = await Promise.all([createTestDatabase(), makeSecrets()]);
});
afterAll(async () => {
  // A server this test left behind (the defect it checks for) does not outlive it.
  try {
    // `--`: the mark starts with dashes, which pkill would otherwise read as an option of its own.
    execFileSync('pkill', ['-KILL', '-f', '--', MARK], { stdio: 'ignore' });
  } catch {
    // none left: pkill exits 1
  }
  await t?.drop();
});

const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

describe('npm run serve', () => {
  it('stops its server, gracefully, when npm is sent SIGTERM', async () => {
    const port = await freePort();
    const npm = await spawnReady(
      'npm',
      ['run', '-s', 'serve', '--', MARK],
      { ...testEnv(secrets, t.url), PORT: String(port) },
      'sluice: listening on',
    );
    let output = '';
    npm.stdout?.on('data', (c: Buffer) => {
      output += c.toString();
    });
    const exited = new Promise((r) => npm.once('exit', r));
    npm.kill('SIGTERM');
    await exited;
    await expect.poll(() => listening(port), { timeout: 10_000 }).toBe(false);
    expect(output).toContain('sluice: SIGTERM: no new claims');
  });
});
