/**
 * Hostile input against every route of the Node server (real HTTP, real Postgres; the routes
 * read from the OpenAPI document, plus the dashboard's): random path
 * segments, query strings, headers, bodies and content types, with valid, foreign and missing
 * keys, one of them an admin key limited to queues. Whatever comes in, the answer is never a 5xx (docs/DESIGN.md §8).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openApiDocument } from '../../src/api/openapi/document.ts';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { generateApiKey } from '../../src/security/api-keys.ts';
import { makeSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';

let t: TestDatabase;
let sluice: NodeSluice;
let keys: string[];

beforeAll(async () => {
  const [db, secrets, admin, limited] = await Promise.all([
    createTestDatabase(),
    makeSecrets(),
    generateApiKey('admin', ['admin']),
    generateApiKey('limited', ['admin']),
  ]);
  t = db;
  keys = [secrets.apiKey, secrets.readKey, admin.key, limited.key];
  const entries = [...JSON.parse(secrets.apiKeysJson), admin.entry, { ...limited.entry, queues: ['tenants', 'def*'] }];
  sluice = await startNodeSluice({
    env: testEnv(secrets, t.url, {
      SLUICE_API_KEYS: JSON.stringify(entries),
      SLUICE_WEBHOOK_SECRET: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
      SLUICE_QUEUES: JSON.stringify({ tenants: { key_from: 'customer.id', key_concurrency: 2 } }),
    }),
    dispatch: false,
  });
  // A group for enqueues to fan out to (and for the group routes to find, change and delete).
  await t.db.query(`insert into sluice.groups (name, urls) values ('fanout', array['http://127.0.0.1:9/a', 'http://127.0.0.1:9/b'])`);
});
afterAll(async () => {
  await sluice?.close();
  await t?.drop();
});

/** A path segment: ids, names, and nasty strings, percent-encoded as a client would send them. */
const segment = fc.oneof(
  fc.constantFrom(
    '1',
    '0',
    '-1',
    '9223372036854775808',
    'default',
    'tenants',
    'fanout',
    '00000000-0000-0000-0000-000000000000',
    encodeURIComponent('https://example.com'),
    encodeURIComponent('http://127.0.0.1:9'),
    '%00',
    '%ff',
    '..',
    '',
  ),
  fc.string({ unit: 'binary', maxLength: 40 }).map(encodeURIComponent),
);
/** Text a client can put anywhere: random, or the values that have broken servers before. */
const nasty = fc.oneof(fc.string({ unit: 'binary', maxLength: 30 }), {
  arbitrary: fc.constantFrom('\u0000', 'a\u0000b', '\ud800', '\uffff', '-5', '1e309', ' ', '%', '../'),
  weight: 2,
});
/** Mostly the known parameters (so requests get past validation), sometimes an unknown one. */
const query = fc
  .record(
    {
      queue: fc.oneof(fc.constantFrom('default', 'tenants'), nasty),
      status: fc.oneof({ arbitrary: fc.constantFrom('pending', 'dead', 'succeeded'), weight: 3 }, nasty),
      concurrency_key: nasty,
      cursor: fc.oneof(fc.constant('YmVmb3JlOjE'), nasty),
      limit: fc.oneof({ arbitrary: fc.integer({ min: 1, max: 500 }).map(String), weight: 3 }, nasty),
      url: fc.oneof(fc.constant('https://example.com/hook'), nasty),
    },
    { requiredKeys: [] },
  )
  .chain((known) => fc.oneof({ arbitrary: fc.constant(known), weight: 9 }, fc.constant({ ...known, unknown: 'x' })))
  .map((q) => new URLSearchParams(q as Record<string, string>).toString());
const jsonBody = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }),
  fc.record(
    {
      url: fc.oneof(fc.constant('http://127.0.0.1:9/x'), fc.string({ unit: 'binary', maxLength: 50 })),
      queue: fc.oneof(fc.constantFrom('default', 'tenants'), fc.string({ maxLength: 10 })),
      body: fc.jsonValue({ maxDepth: 3 }),
      delay_ms: fc.oneof(fc.integer(), fc.double(), fc.string()),
      priority: fc.oneof(fc.integer(), fc.constant(null)),
      concurrency_key: fc.oneof(fc.string({ unit: 'binary', maxLength: 20 }), fc.constant(null)),
      dedup_key: fc.string({ unit: 'binary', maxLength: 10 }),
      dedup_ttl_ms: fc.oneof(fc.integer(), fc.double(), fc.string(), fc.constant(null)),
      group: fc.oneof(fc.constantFrom('fanout', 'none'), fc.string({ unit: 'binary', maxLength: 10 }), fc.integer()),
      urls: fc.oneof(
        fc.array(fc.oneof(fc.constant('http://127.0.0.1:9/x'), fc.string({ unit: 'binary', maxLength: 30 })), { maxLength: 3 }),
        fc.jsonValue({ maxDepth: 2 }),
      ),
      headers: fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ unit: 'binary', maxLength: 8 }), { maxKeys: 3 }),
      tasks: fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 }),
      concurrency: fc.oneof(fc.integer(), fc.constant(null), fc.boolean()),
      key_strategy: fc.oneof(
        fc.constantFrom('queue', 'cancel_in_progress', 'cancel_newest', 'replace_pending'),
        fc.constant(null),
        fc.string({ maxLength: 12 }),
      ),
      limit: fc.oneof(fc.integer(), fc.string()),
      extend_ms: fc.integer(),
      result: fc.jsonValue({ maxDepth: 2 }),
      delay: fc.anything(),
    },
    { requiredKeys: [] },
  ),
);
/** POST /v1/tasks/redrive's fields alone (the record above always names others, which it refuses). */
const redriveBody = fc.record(
  {
    queue: fc.oneof(fc.constantFrom('default', 'tenants'), fc.string({ maxLength: 10 })),
    url_prefix: fc.oneof(fc.constantFrom('http://127.0.0.1:9/', 'http://127.0.0.1:9/\u0000'), fc.string({ unit: 'binary', maxLength: 30 })),
    since: fc.oneof(
      fc.date().map((d) => (Number.isNaN(d.getTime()) ? 'x' : d.toISOString())),
      fc.string({ maxLength: 30 }),
    ),
    until: fc.oneof(
      fc.date().map((d) => (Number.isNaN(d.getTime()) ? 'x' : d.toISOString())),
      fc.string({ maxLength: 30 }),
    ),
    dry_run: fc.oneof(fc.boolean(), fc.string({ maxLength: 5 })),
    after: fc.oneof(fc.constantFrom('1', '0', '9223372036854775807', '9223372036854775808'), fc.string({ maxLength: 20 })),
  },
  { requiredKeys: [] },
);
const body = fc.oneof(
  jsonBody.map((v) => JSON.stringify(v) ?? 'null'),
  redriveBody.map((v) => JSON.stringify(v)),
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc.constantFrom('', '{', '[]', 'null', '{"url":', '\u0000', '{"tasks":[{}]}'),
);
/** Every operation of the OpenAPI document, its path parameters as `:a`, `:b` in order. */
const DOCUMENTED = Object.entries((openApiDocument() as { paths: Record<string, Record<string, unknown>> }).paths).flatMap(([path, ops]) =>
  Object.keys(ops)
    .filter((m) => ['get', 'post', 'put', 'patch', 'delete'].includes(m))
    .map((m) => {
      let n = 0;
      return `${m.toUpperCase()} ${path.replace(/\{[^}]+\}/g, () => (n++ === 0 ? ':a' : ':b'))}`;
    }),
);
/** And what the document does not describe: the dashboard's pages and actions, and a method no route has. */
const UNDOCUMENTED = [
  'GET /dashboard',
  'GET /dashboard/login',
  'POST /dashboard/login',
  'POST /dashboard/logout',
  'GET /dashboard/queues/:a',
  'GET /dashboard/queues/:a/live',
  'GET /dashboard/tasks',
  'GET /dashboard/tasks/:a',
  'GET /dashboard/dead',
  'GET /dashboard/waiting',
  'GET /dashboard/endpoints',
  'GET /dashboard/groups',
  'GET /dashboard/confirm/:a',
  'POST /dashboard/actions/:a',
  'PATCH /v1/tasks',
];
const ROUTES = [...DOCUMENTED, ...UNDOCUMENTED];
const auth = fc.oneof(
  { arbitrary: fc.constantFrom(0, 1, 2, 3).map((i) => `Bearer ${keys[i]}`), weight: 6 },
  fc.constantFrom('', 'Bearer', 'Bearer sk_sluice_nope', 'Basic Zm9vOmJhcg==', `Bearer ${'a'.repeat(5000)}`),
  fc.string({ maxLength: 40 }).map((s) => `Bearer ${s}`),
);
const contentType = fc.constantFrom(
  'application/json',
  'application/json; charset=utf-8',
  'text/plain',
  '',
  'application/x-www-form-urlencoded',
  'application/json; charset=latin1',
);

/** One request; its status. (Bad keys past the brake get 429, valid keys always get in.) */
async function send(method: string, path: string, headers: Record<string, string>, body: string | null): Promise<number> {
  const res = await fetch(`${sluice.url}${path}`, { method, headers, ...(body === null ? {} : { body }) });
  await res.arrayBuffer();
  return res.status;
}

describe('hostile requests', () => {
  const seen = new Map<number, number>();
  afterAll(() => console.info(`fuzz: statuses ${JSON.stringify(Object.fromEntries([...seen].sort(([a], [b]) => a - b)))}`));

  it.each(ROUTES)('%s never answers 5xx, whatever the path, query, headers or body', async (r) => {
    const [method, template] = r.split(' ') as [string, string];
    await fc.assert(
      fc.asyncProperty(segment, segment, query, auth, contentType, body, async (a, b, q, authorization, type, payload) => {
        const path = template.replace(':a', a).replace(':b', b);
        const headers: Record<string, string> = {};
        if (authorization) headers.authorization = authorization.replace(/[^\t\x20-\x7e]/g, '');
        if (type) headers['content-type'] = type;
        const status = await send(method, `${path}${q ? `?${q}` : ''}`, headers, method === 'GET' || method === 'DELETE' ? null : payload);
        seen.set(status, (seen.get(status) ?? 0) + 1);
        expect(status, `${method} ${path}?${q} → ${status}`).toBeLessThan(500);
      }),
      { numRuns: 60 },
    );
  });

  it('covers every operation of the OpenAPI document', () => {
    expect(DOCUMENTED.length).toBeGreaterThanOrEqual(34);
    expect(ROUTES).toContain('POST /v1/leases/:a/wait');
    expect(ROUTES).toContain('PUT /v1/queues/:a/keys/:b');
    expect(ROUTES).toEqual(expect.arrayContaining(['GET /v1/endpoints', 'POST /v1/endpoints/:a/pause', 'POST /v1/tasks/redrive']));
  });

  it('reached past authentication and validation, not only 401s', () => {
    expect([...seen.keys()].some((s) => s >= 200 && s < 300)).toBe(true);
    expect(seen.get(400)).toBeGreaterThan(50);
  });
});
