/**
 * The OpenAPI document is the contract: every answer of a full flow through the Node server
 * (real HTTP, real Postgres, a real endpoint keeping a lease) is validated against the schema
 * `/openapi.json` gives for its operation and status, with a JSON Schema validator (Ajv).
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { generateApiKey } from '../../src/security/api-keys.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { startEndpoint, type TestEndpoint } from '../helpers/endpoint.ts';

type Content = Record<string, { schema: object }>;
type Doc = {
  paths: Record<string, Record<string, { requestBody?: { content: Content }; responses: Record<string, { content?: Content }> }>>;
  components: object;
};

let t: TestDatabase;
let sluice: NodeSluice;
let endpoint: TestEndpoint;
let secrets: TestSecrets;
let admin: string;
let doc: Doc;
const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
const checked: string[] = [];

beforeAll(async () => {
  let adminKey: Awaited<ReturnType<typeof generateApiKey>>;
  [t, endpoint, secrets, adminKey] = await Promise.all([
    createTestDatabase(),
    startEndpoint(),
    makeSecrets(),
    generateApiKey('admin', ['admin']),
  ]);
  admin = adminKey.key;
  sluice = await startNodeSluice({
    env: testEnv(secrets, t.url, {
      SLUICE_API_KEYS: JSON.stringify([...JSON.parse(secrets.apiKeysJson), adminKey.entry]),
      SLUICE_WEBHOOK_SECRET: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    }),
  });
  doc = (await (await fetch(`${sluice.url}/openapi.json`)).json()) as Doc;
});
afterAll(async () => {
  await sluice?.close();
  await endpoint?.close();
  await t?.drop();
});

/** Calls the API and validates the answer against the document's schema for `template` and its status. */
async function call(
  method: string,
  template: string,
  path: string,
  options: { body?: unknown; key?: string } = {},
): Promise<{ status: number; json: any }> {
  const res = await fetch(`${sluice.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${options.key ?? secrets.apiKey}`,
      ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
  });
  const text = await res.text();
  const operation = doc.paths[template]?.[method.toLowerCase()];
  expect(operation, `${method} ${template} is documented`).toBeDefined();
  const documented = operation!.responses[String(res.status)] ?? operation!.responses[`${String(res.status)[0]}XX`];
  expect(documented, `${method} ${template} documents status ${res.status}`).toBeDefined();
  const schema = documented!.content?.['application/json']?.schema ?? documented!.content?.['application/problem+json']?.schema;
  if (schema) {
    const validate = ajv.compile({ ...schema, components: doc.components });
    const json = JSON.parse(text);
    expect(validate(json), `${method} ${path} → ${res.status}: ${JSON.stringify(validate.errors)}`).toBe(true);
  } else {
    expect(text).toBe('');
  }
  // A request the server accepted must be one the document accepts too.
  const requestSchema = operation!.requestBody?.content['application/json']?.schema;
  if (res.status < 300 && options.body !== undefined && requestSchema) {
    const validate = ajv.compile({ ...requestSchema, components: doc.components });
    expect(validate(options.body), `${method} ${path} body ${JSON.stringify(options.body)}: ${JSON.stringify(validate.errors)}`).toBe(true);
  }
  checked.push(`${method} ${template} ${res.status}`);
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

describe('every answer matches /openapi.json', () => {
  it('through a full flow: tasks, leases, queues, keys, webhooks, problems', async () => {
    endpoint.reply(() => ({ status: 202, headers: { 'Sluice-Ack': 'lease' } }));
    const created = await call('POST', '/v1/tasks', '/v1/tasks', {
      body: { url: `${endpoint.url}/hold`, dedup_key: 'd1', body: { a: 1 } },
    });
    expect(created.status).toBe(201);
    expect((await call('POST', '/v1/tasks', '/v1/tasks', { body: { url: `${endpoint.url}/hold`, dedup_key: 'd1' } })).status).toBe(200);
    await call('POST', '/v1/tasks/batch', '/v1/tasks/batch', { body: { tasks: [{ url: `${endpoint.url}/b`, delay_ms: 3_600_000 }] } });
    await call('GET', '/v1/tasks', '/v1/tasks?limit=1');
    const [push] = await endpoint.waitFor(1);
    const lease = push!.headers['sluice-lease-id'] as string;
    const token = push!.headers['sluice-lease-token'] as string;
    await expect.poll(async () => (await call('GET', '/v1/tasks/{id}', `/v1/tasks/${created.json.id}`)).json.status).toBe('leased');
    await call('POST', '/v1/leases/{lease_id}/heartbeat', `/v1/leases/${lease}/heartbeat`, { body: {}, key: token });
    await call('POST', '/v1/leases/{lease_id}/complete', `/v1/leases/${lease}/complete`, { body: { result: 'ok' }, key: token });
    await call('POST', '/v1/leases/{lease_id}/complete', `/v1/leases/${lease}/complete`, { body: {}, key: token });
    await call('POST', '/v1/leases/{lease_id}/fail', `/v1/leases/${lease}/fail`, { body: {}, key: token });
    await call('GET', '/v1/tasks/{id}', `/v1/tasks/${created.json.id}`);
    await call('POST', '/v1/tasks/{id}/retry', `/v1/tasks/${created.json.id}/retry`);
    const later = (await call('POST', '/v1/tasks', '/v1/tasks', { body: { url: `${endpoint.url}/c`, delay_ms: 3_600_000 } })).json.id;
    await call('POST', '/v1/tasks/{id}/cancel', `/v1/tasks/${later}/cancel`);
    await call('GET', '/v1/queues', '/v1/queues');
    await call('GET', '/v1/queues/{queue}', '/v1/queues/default');
    await call('PUT', '/v1/queues/{queue}', '/v1/queues/default', { body: { concurrency: 5 }, key: admin });
    await call('PUT', '/v1/queues/{queue}', '/v1/queues/default', { body: { concurrency: null, paused: false }, key: admin });
    await call('POST', '/v1/queues/{queue}/pause', '/v1/queues/default/pause', { key: admin });
    await call('POST', '/v1/queues/{queue}/resume', '/v1/queues/default/resume', { key: admin });
    await call('DELETE', '/v1/queues/{queue}', '/v1/queues/default', { key: admin });
    await call('PUT', '/v1/queues/{queue}/keys/{key}', '/v1/queues/default/keys/acme', { body: { limit: 2 }, key: admin });
    await call('DELETE', '/v1/queues/{queue}/keys/{key}', '/v1/queues/default/keys/acme', { key: admin });
    await call('GET', '/v1/queues/{queue}/concurrency', '/v1/queues/default/concurrency');
    await call('POST', '/v1/queues/{queue}/leases/{lease_id}/release', `/v1/queues/default/leases/${crypto.randomUUID()}/release`, {
      key: admin,
    });
    await call('GET', '/v1/webhooks/secret', `/v1/webhooks/secret?url=${encodeURIComponent('https://example.com/h')}`, { key: admin });
    await call('GET', '/.well-known/jwks.json', '/.well-known/jwks.json');
    await call('GET', '/healthz', '/healthz');
    await call('POST', '/v1/tasks', '/v1/tasks', { body: { url: 'ftp://x' } });
    await call('GET', '/v1/tasks', '/v1/tasks', { key: 'sk_sluice_wrong' });
    expect(checked.length).toBeGreaterThan(25);
  });

  it('documents every operation with a unique operationId', () => {
    const ids = Object.values(doc.paths).flatMap((item) =>
      Object.entries(item)
        .filter(([m]) => m !== 'parameters')
        .map(([, op]) => (op as { operationId?: string }).operationId),
    );
    expect(ids.every((id) => typeof id === 'string')).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
