/**
 * A short slice of the fault matrix (`npm run test:faults` runs it all): the same harness and
 * checker, fewer items and faults. Real Sluice processes (`node src/node/serve.ts`) on a real
 * Postgres, through a TCP proxy, pushing over real HTTP to an endpoint that logs every push,
 * under a cluster cap, a queue limit and key limits that all bind. One fault per run, then the
 * total-queue check: nothing lost, every duplicate explained by the fault (same task id and
 * `webhook-id`), the endpoint never above a limit while a lease is live, no lease left at rest,
 * no stale lease call accepted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { type FaultEndpoint, startFaultEndpoint } from './matrix/endpoint.ts';
import { FAULTS } from './matrix/faults.ts';
import { markdownTable } from './matrix/report.ts';
import { type RunSetup, runFault } from './matrix/scenario.ts';
import { runSecrets } from './matrix/setup.ts';

const ITEMS = 1_000;
const SLICE = ['kill-mid-push', 'terminate-claim', 'network-drop', 'endpoint-hang', 'lease-calls'];

let t: TestDatabase;
let endpoint: FaultEndpoint;
let setup: RunSetup;
let sluiceUrl = () => '';

beforeAll(async () => {
  t = await createTestDatabase();
  endpoint = await startFaultEndpoint({ sluiceUrl: () => sluiceUrl() });
  const { env, apiKey } = await runSecrets(t.url);
  setup = {
    db: { url: t.url },
    endpoint,
    env,
    apiKey,
    log: () => {},
    setSluiceUrl: (url) => {
      sluiceUrl = url;
    },
  };
});
afterAll(async () => {
  await endpoint?.close();
  await t?.drop();
});

describe('the fault matrix, a slice', () => {
  it.each(SLICE)(
    '%s: nothing lost, duplicates explained, limits held, no lease left',
    async (name) => {
      const fault = FAULTS.find((f) => f.name === name)!;
      const result = await runFault(fault, setup, ITEMS);
      console.info(markdownTable([{ ...result, path: 'Node', fault: fault.name, title: fault.title }]).split('\n')[2]);
      expect(result.verdict.problems).toEqual([]);
      expect(result.verdict).toMatchObject({ lost: 0, leasedAtRest: 0, overLimit: 0, staleAccepted: 0 });
      expect(result.verdict.explained).toBe(result.verdict.duplicates);
    },
    120_000,
  );
});
