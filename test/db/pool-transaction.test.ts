/**
 * A connection lost in the middle of a transaction (src/db/db.ts `poolDb`), against a real
 * Postgres through a relay that cuts it: the transaction fails with the loss, a passing fault
 * (503 to an API client), and nothing is left unheard to crash the process. A checked-out
 * client's lost connection is emitted on the client, which the pool does not listen to:
 * unheard, it was an uncaught exception that took the Node server down.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { isTransientDbError } from '../../src/db/faults.ts';
import { openPgDb } from '../../src/node/pg-db.ts';
import { type RunningDelay, startTcpDelay } from '../../src/node/tcp-delay.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';

let t: TestDatabase;
let relay: RunningDelay;
beforeAll(async () => {
  t = await createTestDatabase();
  relay = await startTcpDelay({ host: '127.0.0.1', port: inject('pgPort') }, 0);
});
afterAll(async () => {
  await relay?.close();
  await t?.drop();
});

describe('a transaction whose connection is lost', () => {
  it('fails as a passing fault, and crashes nothing', async () => {
    const through = new URL(t.url);
    through.port = String(relay.port);
    const db = openPgDb(through.href, 2);
    const uncaught: unknown[] = [];
    const hear = (error: unknown) => uncaught.push(error);
    process.on('uncaughtException', hear);
    try {
      const failed = await db
        .transaction(async (tx) => {
          await tx.query('select 1');
          setTimeout(() => relay.cut(), 50);
          await tx.query('select pg_sleep(1)');
        })
        .catch((error: unknown) => error);
      expect(isTransientDbError(failed)).toBe(true);
      // The client's own 'error' event comes on the same turn as the statement's failure, or just after.
      await new Promise((r) => setTimeout(r, 100));
      expect(uncaught).toEqual([]);
      // The pool goes on with a new connection.
      expect(await db.query<{ one: number }>('select 1 as one')).toEqual([{ one: 1 }]);
    } finally {
      process.off('uncaughtException', hear);
      await db.close();
    }
  });
});
