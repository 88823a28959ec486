/**
 * A short slice of the fault matrix (`npm run test:faults` runs it all): the same harness and
 * checker, fewer items and faults. Real Sluice processes (`node src/node/serve.ts`) on a real
 * Postgres, through a TCP proxy, pushing over real HTTP to an endpoint that logs every push,
 * under a cluster cap, a queue limit and key limits that all bind. One fault per run, then the
 * total-queue check: nothing lost, every duplicate explained by the fault (same task id and
 * `webhook-id`), the endpoint never above a limit while a lease is live, no lease left at rest,
 * no stale lease call accepted.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { type FaultEndpoint, startFaultEndpoint } from './matrix/endpoint.ts';
import { FAULTS } from './matrix/faults.ts';
import { markdownTable } from './matrix/report.ts';
import { type RunSetup, runFault } from './matrix/scenario.ts';
import { runSecrets } from './matrix/setup.ts';
import { runWorkerFault, WORKER_FAULTS } from './matrix/worker.ts';

const ITEMS = 1_000;
const SLICE = ['kill-mid-push', 'terminate-claim', 'network-drop', 'endpoint-hang', 'lease-calls'];
const WORKER_SLICE = ['worker-restart'];

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

function expectHeld(result: Awaited<ReturnType<typeof runFault>>, path: 'Node' | 'Worker'): void {
  console.info(markdownTable([{ ...result, path, fault: result.fault.name, title: result.fault.title }]).split('\n')[2]);
  expect(result.verdict.problems).toEqual([]);
  expect(result.verdict).toMatchObject({ lost: 0, leasedAtRest: 0, overLimit: 0, staleAccepted: 0 });
  expect(result.verdict.explained).toBe(result.verdict.duplicates);
}

describe('the fault matrix, a slice', () => {
  it.each(SLICE)(
    'Node, %s: nothing lost, duplicates explained, limits held, no lease left',
    async (name) => {
      expectHeld(await runFault(FAULTS.find((f) => f.name === name)!, setup, ITEMS), 'Node');
    },
    120_000,
  );

  it.each(WORKER_SLICE)(
    'Worker, %s: nothing lost, duplicates explained, limits held, no lease left',
    async (name) => {
      const fault = WORKER_FAULTS.find((f) => f.name === name)!;
      expectHeld(await runWorkerFault(fault, { ...setup, pgPort: inject('pgPort') }, ITEMS / 2), 'Worker');
    },
    120_000,
  );
});
