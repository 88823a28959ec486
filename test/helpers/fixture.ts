/**
 * The usual db-tier setup: a fresh database, a recording endpoint, a parsed configuration and
 * its keyring; emptied between tests, torn down after the file.
 */
import { afterAll, beforeAll, beforeEach } from 'vitest';
import type { Config } from '../../src/config.ts';
import { type Keyring, loadKeyring } from '../../src/security/keyring.ts';
import { testConfig } from './config.ts';
import { createTestDatabase, emptyTables, type TestDatabase } from './db.ts';
import { startEndpoint, type TestEndpoint } from './endpoint.ts';

export interface DispatchFixture {
  t: TestDatabase;
  endpoint: TestEndpoint;
  config: Config;
  keyring: Keyring;
}

/** Registers the hooks; the returned object is filled in before the first test runs. */
export function useDispatchFixture(env: Record<string, string> = {}): DispatchFixture {
  const f = {} as DispatchFixture;
  beforeAll(async () => {
    [f.t, f.endpoint] = await Promise.all([createTestDatabase(), startEndpoint()]);
    ({ config: f.config } = await testConfig(f.t.url, env));
    f.keyring = await loadKeyring(f.config.signingKeys);
  });
  afterAll(async () => {
    await f.endpoint?.close();
    await f.t?.drop();
  });
  beforeEach(async () => {
    await emptyTables(f.t.db, 'sluice.tasks, sluice.lanes, sluice.queues, sluice.key_limits');
    f.endpoint.received.length = 0;
    f.endpoint.reply(() => ({ status: 200, body: 'ok' }));
  });
  return f;
}
