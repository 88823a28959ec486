/**
 * The dashboard over real HTTP, on the Node server and a real Postgres, without a browser: what
 * crafted links and form values get, and what a reverse proxy in front of it changes.
 * test/worker/dashboard.test.ts drives a real browser through the everyday paths.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { taskClaimBatch } from '../../src/db/claim.ts';
import { endpointGet, endpointPause } from '../../src/db/endpoints.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { moveStragglers } from '../../src/db/history.ts';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { generateApiKey } from '../../src/security/api-keys.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, emptyTables, type TestDatabase } from '../helpers/db.ts';
import { newTask } from '../helpers/tasks.ts';

const admin = await generateApiKey('ops', ['admin']);
let t: TestDatabase;
let secrets: TestSecrets;
/** The API only: nothing is pushed unless a test leases a task itself. */
let node: NodeSluice;
let session: string;

beforeAll(async () => {
  [t, secrets] = await Promise.all([createTestDatabase(), makeSecrets()]);
  node = await startNodeSluice({ env: env(), dispatch: false });
  session = await login(node.url);
});
afterAll(async () => {
  await node?.close();
  await t?.drop();
});
beforeEach(async () => {
  await emptyTables(t.db, 'sluice.tasks, sluice.lanes, sluice.key_limits, sluice.queues');
});

function env(extra: Record<string, string> = {}): Record<string, string> {
  return testEnv(secrets, t.url, { SLUICE_API_KEYS: JSON.stringify([...JSON.parse(secrets.apiKeysJson), admin.entry]), ...extra });
}

const form = (fields: Record<string, string>) => ({
  method: 'POST',
  redirect: 'manual' as const,
  headers: { 'content-type': 'application/x-www-form-urlencoded' },
  body: new URLSearchParams(fields).toString(),
});

/** Signs in with the admin key, as the login form does from `origin`; the session cookie. */
async function login(base: string, origin = base): Promise<string> {
  const res = await fetch(`${base}/dashboard/login`, { ...form({ key: admin.key }), headers: { ...form({}).headers, origin } });
  expect(res.status).toBe(303);
  return /^(sluice_session=[^;]+)/.exec(res.headers.get('set-cookie') ?? '')![1]!;
}

/** A signed-in GET. */
const page = (path: string, base = node.url) => fetch(`${base}${path}`, { redirect: 'manual', headers: { cookie: session } });

/** A signed-in POST of a form from this host's page. */
const post = (path: string, fields: Record<string, string>, base = node.url, origin = base) =>
  fetch(`${base}${path}`, { ...form(fields), headers: { ...form({}).headers, cookie: session, origin } });

describe('crafted links and form values', () => {
  it('an action name an object inherits (constructor, __proto__, toString) is not found: 404, not 500', async () => {
    for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'nope']) {
      const shown = await page(`/dashboard/confirm/${name}`);
      expect(shown.status, name).toBe(404);
      expect(await shown.text()).toContain(`a dashboard action ${name} was not found`);
      expect((await post(`/dashboard/actions/${name}`, { queue: 'a' })).status, name).toBe(404);
    }
  });

  it("the force-release page names the lease's holder as the database has it, whatever the link says", async () => {
    const ids = (
      await taskInsertMany(t.db, [
        newTask({ queue: 'reports', concurrencyKey: 'acme' }),
        newTask({ queue: 'reports', concurrencyKey: 'acme' }),
      ])
    ).map((r) => r.task.id);
    const [leased] = await taskClaimBatch(t.db, { max: 1, clusterCap: null, queuesJson: '{}' });
    const other = ids.find((id) => id !== leased!.id)!;
    const crafted = await page(
      `/dashboard/confirm/release?${new URLSearchParams({ queue: 'reports', lease: leased!.lease.id, task: other })}`,
    );
    const text = await crafted.text();
    expect(crafted.status).toBe(200);
    expect(text).toContain(`Force-release lease ${leased!.lease.id} of task #${leased!.id}?`);
    expect(text).toContain('key acme');
    expect(text).not.toContain(`task #${other}`);
    // Not held: a lease that ended (or never was), another queue's, or no lease id at all.
    for (const [queue, lease] of [
      ['reports', crypto.randomUUID()],
      ['other', leased!.lease.id],
      ['reports', 'nope'],
    ] as const) {
      const res = await page(`/dashboard/confirm/release?${new URLSearchParams({ queue, lease })}`);
      expect(res.status, `${queue} ${lease}`).toBe(404);
      expect(await res.text()).toContain(`is not held in queue ${queue}`);
    }
  });

  it('redrive all gets past 10,000 dead tasks held back by their dedup key: each confirmation goes on from the last', async () => {
    // 10,001 dead tasks of one dedup key, which a pending task holds, then one that can go.
    const enqueued: string[] = [];
    for (let i = 0; i < 11; i++) {
      const batch = Array.from({ length: i < 10 ? 1_000 : 1 }, () => newTask({ queue: 'bulk' }));
      enqueued.push(...(await taskInsertMany(t.db, batch)).map((r) => r.task.id));
    }
    await t.db.query(`update sluice.tasks set status = 'dead', finished_at = now(), attempts = 1, dedup_key = 'held' where queue = 'bulk'`);
    await taskInsertMany(t.db, [newTask({ queue: 'bulk', dedupKey: 'held' })]);
    const [free] = (await taskInsertMany(t.db, [newTask({ queue: 'bulk' })])).map((r) => r.task.id);
    await t.db.query(`update sluice.tasks set status = 'dead', finished_at = now(), attempts = 1 where id = $1`, [free]);
    // Dead in place, then into history as any finished task (db/history.ts).
    await moveStragglers(t.db, 20_000);
    const status = async () =>
      (await t.db.query<{ status: string }>('select status from sluice.all_tasks where id = $1', [free]))[0]!.status;

    // An operator confirms, and confirms again on the page that opens.
    let fields: Record<string, string> = { queue: 'bulk' };
    const notices: string[] = [];
    for (let round = 0; round < 2; round++) {
      const res = await post('/dashboard/actions/redrive-all', fields);
      expect(res.status).toBe(303);
      notices.push(decodeURIComponent(/sluice_notice=([^;]*)/.exec(res.headers.get('set-cookie') ?? '')?.[1] ?? ''));
      const next = new URL(res.headers.get('location')!, node.url);
      if (next.pathname !== '/dashboard/confirm/redrive-all') break;
      expect(Object.fromEntries(next.searchParams)).toEqual({ queue: 'bulk', after: enqueued[9_999] });
      const confirmation = await (await page(`${next.pathname}${next.search}`)).text();
      expect(confirmation).toContain(`after task #${enqueued[9_999]}`);
      fields = Object.fromEntries(next.searchParams);
    }
    expect(notices[0]).toContain('Redrove 0 dead tasks; 10000 stayed dead');
    expect(notices[0]).toContain('more remain');
    expect(notices[1]).toContain('Redrove 1 dead task; 1 stayed dead');
    expect(await status()).toBe('pending');
    // A bad `after` is a 400 naming it.
    expect((await post('/dashboard/actions/redrive-all', { queue: 'bulk', after: 'x' })).status).toBe(400);
  }, 60_000);

  it('the cancel confirmation says that unfinished children are cancelled with the task', async () => {
    const text = await (await page('/dashboard/confirm/cancel?id=7')).text();
    expect(text).toContain('Cancel task #7?');
    expect(text).toContain('Its unfinished children (the tasks that name it as parent_id, theirs, and so on) are cancelled with it');
  });

  it('a sign-in `next` with a control character (CR, LF, NUL) goes to /dashboard instead: 303, not 500', async () => {
    for (const next of ['/dashboard/x\r\nSet-Cookie: a=b', '/dashboard/tasks\n', '/dashboard/tasks?x=\0', '/dashboard/t\u0085x']) {
      const res = await fetch(`${node.url}/dashboard/login`, {
        ...form({ key: admin.key, next }),
        headers: { ...form({}).headers, origin: node.url },
      });
      expect(res.status, JSON.stringify(next)).toBe(303);
      expect(res.headers.get('location')).toBe('/dashboard');
      const shown = await fetch(`${node.url}/dashboard/login?${new URLSearchParams({ next })}`);
      expect(await shown.text()).toContain('name="next" value="/dashboard"');
    }
    // A plain dashboard path still goes through.
    const res = await fetch(`${node.url}/dashboard/login`, {
      ...form({ key: admin.key, next: '/dashboard/tasks?status=dead' }),
      headers: { ...form({}).headers, origin: node.url },
    });
    expect(res.headers.get('location')).toBe('/dashboard/tasks?status=dead');
  });
});

describe('endpoints and replay', () => {
  const DOWN = 'https://down.example';
  /** The notice an action leaves for the next page. */
  const notice = (res: Response) =>
    (JSON.parse(decodeURIComponent(/sluice_notice=([^;]*)/.exec(res.headers.get('set-cookie') ?? '')?.[1] ?? '{}')) as { text?: string })
      .text;

  it('lists origins, those not healthy first, and pauses and resumes one through confirmations a forged POST cannot skip', async () => {
    await t.db.query(`insert into sluice.endpoints (origin, failures_total) values ('https://fine.example', 0)`);
    await endpointPause(t.db, 'https://paused.example');
    const listed = await (await page('/dashboard/endpoints')).text();
    expect(listed.indexOf('data-origin="https://paused.example"')).toBeGreaterThan(0);
    expect(listed.indexOf('data-origin="https://paused.example"')).toBeLessThan(listed.indexOf('data-origin="https://fine.example"'));

    // Not an origin: 400 naming it, on the confirmation and on the action alike.
    for (const bad of ['ftp://x', `${DOWN}/path`, 'nope']) {
      const shown = await page(`/dashboard/confirm/endpoint-pause?${new URLSearchParams({ origin: bad })}`);
      expect(shown.status, bad).toBe(400);
      expect(await shown.text()).toContain('origin: must be an http(s) origin');
      expect((await post('/dashboard/actions/endpoint-pause', { origin: bad })).status, bad).toBe(400);
    }
    const confirmation = await (await page(`/dashboard/confirm/endpoint-pause?${new URLSearchParams({ origin: `${DOWN}:443` })}`)).text();
    expect(confirmation).toContain(`Pause endpoint ${DOWN}?`);
    expect(confirmation).toContain(`curl -s -X POST &#39;${node.url}/v1/endpoints/https%3A%2F%2Fdown.example/pause&#39;`);

    // A POST that does not come from a page of this host changes nothing.
    expect((await post('/dashboard/actions/endpoint-pause', { origin: DOWN }, node.url, 'https://evil.example')).status).toBe(403);
    expect(await endpointGet(t.db, DOWN)).toBeNull();
    const paused = await post('/dashboard/actions/endpoint-pause', { origin: DOWN });
    expect([paused.status, paused.headers.get('location')]).toEqual([303, '/dashboard/endpoints']);
    expect(notice(paused)).toContain(`Endpoint ${DOWN} is paused by hand.`);
    expect(await endpointGet(t.db, DOWN)).toMatchObject({ state: 'paused', pausedBy: 'hand' });

    // The resume's confirmation says what it ends, as the database has it; an unknown origin is 404.
    const resume = await (await page(`/dashboard/confirm/endpoint-resume?${new URLSearchParams({ origin: DOWN })}`)).text();
    expect(resume).toContain('It is paused (paused by hand).');
    const unknown = await page(`/dashboard/confirm/endpoint-resume?${new URLSearchParams({ origin: 'https://unknown.example' })}`);
    expect(unknown.status).toBe(404);
    expect((await post('/dashboard/actions/endpoint-resume', { origin: DOWN }, node.url, 'https://evil.example')).status).toBe(403);
    expect(await endpointGet(t.db, DOWN)).toMatchObject({ state: 'paused' });
    const resumed = await post('/dashboard/actions/endpoint-resume', { origin: DOWN });
    expect(notice(resumed)).toContain(`Endpoint ${DOWN} is healthy`);
    expect(await endpointGet(t.db, DOWN)).toMatchObject({ state: 'healthy', pausedBy: null });
  });

  it('replays the dead tasks that match: the confirmation counts them first, the action redrives them', async () => {
    const urls = [`${DOWN}/a/1`, `${DOWN}/a/2`, 'https://down.example.com/a/3', 'https://other.example/a/4'];
    const ids = (
      await taskInsertMany(
        t.db,
        urls.map((url) => newTask({ queue: 'replay', url })),
      )
    ).map((r) => r.task.id);
    await t.db.query(`update sluice.tasks set status = 'dead', finished_at = now(), attempts = 1 where queue = 'replay'`);
    await moveStragglers(t.db, 100);
    const statuses = async () =>
      (await t.db.query<{ status: string }>('select status from sluice.all_tasks where id = any($1::bigint[]) order by id', [ids])).map(
        (r) => r.status,
      );
    const fields = { queue: 'replay', url_prefix: `${DOWN}/`, since: new Date(Date.now() - 3_600_000).toISOString(), until: '' };

    // The confirmation is the dry run: it counts, names the API call, and redrives nothing.
    const counted = await (await page(`/dashboard/confirm/redrive-matching?${new URLSearchParams(fields)}`)).text();
    expect(counted).toContain('Redrive 2 dead tasks that match?');
    expect(counted).toContain(`whose URL starts with ${DOWN}/`);
    expect(counted).toContain(`/v1/tasks/redrive&#39; -H &quot;authorization: Bearer $SLUICE_API_KEY&quot;`);
    expect(counted).toContain(JSON.stringify({ queue: 'replay', url_prefix: `${DOWN}/`, since: fields.since }).replace(/"/g, '&quot;'));
    expect(await statuses()).toEqual(['dead', 'dead', 'dead', 'dead']);
    // Nothing died before an hour ago.
    const none = await (await page(`/dashboard/confirm/redrive-matching?${new URLSearchParams({ until: fields.since })}`)).text();
    expect(none).toContain('Redrive 0 dead tasks that match?');

    // Bad values: a 400 naming each, as the API's.
    for (const [bad, path] of [
      [{ since: 'yesterday' }, 'since'],
      [{ since: '2030-01-02T00:00:00Z', until: '2030-01-01T00:00:00Z' }, 'until'],
      [{ queue: 'no spaces' }, 'queue'],
      [{ after: 'x' }, 'after'],
    ] as const) {
      const shown = await page(`/dashboard/confirm/redrive-matching?${new URLSearchParams(bad)}`);
      expect(shown.status, path).toBe(400);
      expect(await shown.text(), path).toContain(`${path}: `);
      expect((await post('/dashboard/actions/redrive-matching', bad)).status, path).toBe(400);
    }
    expect((await post('/dashboard/actions/redrive-matching', fields, node.url, 'https://evil.example')).status).toBe(403);
    expect(await statuses()).toEqual(['dead', 'dead', 'dead', 'dead']);

    const done = await post('/dashboard/actions/redrive-matching', fields);
    expect(done.status).toBe(303);
    expect(notice(done)).toBe('Redrove 2 dead tasks.');
    expect(await statuses()).toEqual(['pending', 'pending', 'dead', 'dead']);
  });
});

describe('behind a reverse proxy that rewrites Host', () => {
  // nginx's default `proxy_pass http://127.0.0.1:<port>;` sends the upstream's Host; the browser
  // sends its own Origin. The test's requests are what such a proxy forwards.
  const PUBLIC = 'https://sluice.example.com';
  let proxied: NodeSluice;
  beforeAll(async () => {
    proxied = await startNodeSluice({ env: env({ SLUICE_PUBLIC_URL: PUBLIC }), dispatch: false });
  });
  afterAll(async () => {
    await proxied?.close();
  });
  const paused = async () => (await t.db.query<{ paused: boolean }>(`select paused from sluice.queues where name = 'reports'`))[0]?.paused;

  it('without SLUICE_PUBLIC_URL, sign-in and every POST from the public origin are refused', async () => {
    const res = await fetch(`${node.url}/dashboard/login`, {
      ...form({ key: admin.key }),
      headers: { ...form({}).headers, origin: PUBLIC },
    });
    expect(res.status).toBe(403);
    expect(await res.text()).toContain('SLUICE_PUBLIC_URL');
    expect((await post('/dashboard/actions/pause', { queue: 'reports' }, node.url, PUBLIC)).status).toBe(403);
  });

  it('with SLUICE_PUBLIC_URL, signs in and acts from that origin, shows it in curl lines, and refuses others', async () => {
    const res = await fetch(`${proxied.url}/dashboard/login`, {
      ...form({ key: admin.key }),
      headers: { ...form({}).headers, origin: PUBLIC },
    });
    expect(res.status).toBe(303);
    // The public URL is https: the cookie is Secure though the proxy spoke http.
    expect(res.headers.get('set-cookie')).toMatch(/; Secure;/);
    const cookie = /^(sluice_session=[^;]+)/.exec(res.headers.get('set-cookie') ?? '')![1]!;

    const confirmation = await fetch(`${proxied.url}/dashboard/confirm/pause?queue=reports`, { headers: { cookie } });
    expect(await confirmation.text()).toContain(`${PUBLIC}/v1/queues/reports/pause`);

    const pause = (headers: Record<string, string>) =>
      fetch(`${proxied.url}/dashboard/actions/pause`, {
        ...form({ queue: 'reports' }),
        headers: { ...form({}).headers, cookie, ...headers },
      });
    for (const origin of [proxied.url, 'http://sluice.example.com', 'https://evil.example']) {
      expect((await pause({ origin })).status, origin).toBe(403);
    }
    expect((await pause({ referer: `${proxied.url}/dashboard` })).status).toBe(403);
    expect(await paused()).toBeUndefined();
    expect((await pause({ origin: PUBLIC })).status).toBe(303);
    expect(await paused()).toBe(true);
  });
});
