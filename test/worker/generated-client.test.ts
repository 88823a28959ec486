/**
 * A client generated from /openapi.json, as a user in another project would make it
 * (openapi-typescript + openapi-fetch, test/client/), compiles with no type error and runs every
 * operation against the Node server and against the Worker.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openApiDocument } from '../../src/api/openapi/document.ts';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { generateApiKey } from '../../src/security/api-keys.ts';
import { requireInstalled } from '../client/installed.ts';
import type { Push, Setup } from '../client/setup.ts';
import { testEnv } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { BIN, ROOT } from '../helpers/process.ts';
import { useWorkerFixture } from '../helpers/worker-fixture.ts';

const run = promisify(execFile);
/** Every operation the document describes: a new one the program does not call fails the test. */
const OPERATIONS = Object.values((openApiDocument() as { paths: Record<string, Record<string, { operationId?: string }>> }).paths)
  .flatMap((item) => Object.values(item))
  .filter((op) => typeof op === 'object' && op !== null && 'operationId' in op).length;

const keys = { admin: await generateApiKey('admin', ['admin']), writer: await generateApiKey('writer', ['tasks:write', 'tasks:read']) };
const apiKeys = () => ({ SLUICE_API_KEYS: JSON.stringify([keys.admin.entry, keys.writer.entry]) });
// Admin key for the Worker; the webhook secret makes GET /v1/webhooks/secret answer.
const WEBHOOK_SECRET = `whsec_${btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))))}`;
const f = useWorkerFixture(() => ({ ...apiKeys(), SLUICE_WEBHOOK_SECRET: WEBHOOK_SECRET }));

// test/client is a package of its own (openapi-typescript needs TypeScript 5's compiler API;
// Sluice builds with 7), loaded by path so that Sluice's typecheck does not need its types.
const client = (file: string) => import(new URL(`../client/${file}`, import.meta.url).href);
let everyOperation: (setup: Setup) => Promise<string[]>;

beforeAll(async () => {
  requireInstalled();
  const { generateClientTypes } = (await client('generate.ts')) as { generateClientTypes(document: object): Promise<void> };
  await generateClientTypes(openApiDocument());
  ({ everyOperation } = await client('every-operation.ts'));
}, 60_000);

/** The endpoint keeps every lease (the program ends them with lease calls); pushes in arrival order. */
function setupFor(baseUrl: string): Setup {
  const { endpoint } = f;
  endpoint.received.length = 0;
  endpoint.reply(() => ({ status: 202, headers: { 'sluice-ack': 'lease' } }));
  let taken = 0;
  return {
    baseUrl,
    adminKey: keys.admin.key,
    writeKey: keys.writer.key,
    endpointUrl: endpoint.url,
    async nextPush(): Promise<Push> {
      const all = await endpoint.waitFor(++taken);
      const h = all[taken - 1]!.headers;
      return { taskId: String(h['sluice-task-id']), leaseId: String(h['sluice-lease-id']), token: String(h['sluice-lease-token']) };
    },
    async pushTo(path: string): Promise<Push> {
      for (let n = 1; ; n++) {
        const push = (await endpoint.waitFor(n, 15_000)).find((p) => p.path === path);
        if (!push) continue;
        const h = push.headers;
        return { taskId: String(h['sluice-task-id']), leaseId: String(h['sluice-lease-id']), token: String(h['sluice-lease-token']) };
      }
    },
  };
}

it('compiles with no type error', async () => {
  const compiled = await run(`${BIN}/tsc`, ['-p', 'test/client/tsconfig.json'], { cwd: ROOT }).then(
    () => '',
    (error: { stdout?: string }) => error.stdout ?? String(error),
  );
  expect(compiled).toBe('');
}, 60_000);

describe('runs every operation', () => {
  let t: TestDatabase;
  let node: NodeSluice;
  beforeAll(async () => {
    t = await createTestDatabase();
    node = await startNodeSluice({
      env: testEnv(f.secrets, t.url, { ...apiKeys(), SLUICE_WEBHOOK_SECRET: WEBHOOK_SECRET }),
      maxSleepMs: 60_000,
    });
  });
  afterAll(async () => {
    await node?.close();
    await t?.drop();
  });

  it('against the Node server', async () => {
    expect(await everyOperation(setupFor(node.url))).toHaveLength(OPERATIONS);
  }, 60_000);

  it('against the Worker', async () => {
    expect(await everyOperation(setupFor(f.worker.url))).toHaveLength(OPERATIONS);
  }, 60_000);
});
