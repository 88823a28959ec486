/**
 * The dashboard in a real browser: headless Chromium (the npm package @sparticuz/chromium, no
 * system package) driven by playwright-core, against the Worker in workerd and the Node server.
 * It signs in, finds a stuck slot on the picture and force-releases it, lowers a key's limit,
 * redrives dead tasks, pauses and resumes an endpoint and replays the dead tasks of a URL prefix,
 * checking each effect in the database; and it checks what keeps the session safe: the
 * cookie's flags, a non-admin key refused, a forged POST refused.
 *
 * `SLUICE_SCREENSHOTS=1` also writes the pages docs/guide.md shows (docs/dashboard-*.png).
 */
import chromium from '@sparticuz/chromium';
import { type Browser, type BrowserContext, type Page, chromium as playwright } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Queryable } from '../../src/db/db.ts';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { generateApiKey } from '../../src/security/api-keys.ts';
import { testEnv } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import type { ReceivedPush } from '../helpers/endpoint.ts';
import { ROOT } from '../helpers/process.ts';
import { useWorkerFixture } from '../helpers/worker-fixture.ts';

const admin = await generateApiKey('ops', ['admin']);
const vars = (apiKeysJson: string) => ({
  SLUICE_API_KEYS: JSON.stringify([...JSON.parse(apiKeysJson), admin.entry]),
  SLUICE_CLUSTER_CAP: '12',
  SLUICE_QUEUES: JSON.stringify({ reports: { concurrency: 8, key_concurrency: 2, rate: { limit: 100, period_ms: 60_000 } } }),
});
const f = useWorkerFixture((f) => vars(f.secrets.apiKeysJson));
const SCREENSHOTS = process.env.SLUICE_SCREENSHOTS === '1';

/**
 * @sparticuz/chromium's flags (it is built for serverless functions) less three: two would make
 * this browser laxer than a user's (no same-origin policy, mixed content allowed), and
 * `--single-process` ends the whole browser when a context closes. Its `--no-sandbox` lets it run
 * as root (in CI containers, too); it unpacks itself into the temporary directory on first use.
 */
const DROPPED = ['--disable-web-security', '--allow-running-insecure-content', '--single-process'];
const BROWSER_ARGS = chromium.args.filter((a) => !DROPPED.includes(a));

let browser: Browser;
beforeAll(async () => {
  browser = await playwright.launch({ executablePath: await chromium.executablePath(), args: BROWSER_ARGS, headless: true });
  // `/keep` keeps its lease (long work), so its slot stays held; `/flaky/…` fails a task's
  // first push (so a task with one attempt dies) and takes every later one.
  const seen = new Set<string>();
  f.endpoint.reply((push: ReceivedPush) => {
    if (push.path.startsWith('/keep')) return { status: 202, headers: { 'sluice-ack': 'lease' } };
    const first = !seen.has(`${push.path} ${push.headers['sluice-task-id']}`);
    seen.add(`${push.path} ${push.headers['sluice-task-id']}`);
    return first ? { status: 500, body: 'upstream down' } : { status: 200, body: '{"done":true}' };
  });
}, 60_000);
afterAll(async () => {
  await browser?.close();
});

interface Target {
  name: string;
  url: string;
  db: Queryable;
}

async function enqueue(target: Target, task: object): Promise<string> {
  const res = await fetch(`${target.url}/v1/tasks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${admin.key}`, 'content-type': 'application/json' },
    body: JSON.stringify(task),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

async function row(db: Queryable, id: string): Promise<{ status: string; lease_id: string | null }> {
  const [r] = await db.query<{ status: string; lease_id: string | null }>('select status, lease_id from sluice.all_tasks where id = $1', [
    id,
  ]);
  return r!;
}

async function statusOf(db: Queryable, ids: readonly string[]): Promise<string[]> {
  return Promise.all(ids.map(async (id) => (await row(db, id)).status));
}

/** Clicks the confirmation page's button after checking the API call it shows; back on `back`. */
async function confirm(page: Page, curl: string | RegExp, back: RegExp): Promise<string> {
  await page.waitForURL(/\/dashboard\/confirm\//);
  const shown = (await page.locator('pre.curl').textContent()) ?? '';
  if (typeof curl === 'string') expect(shown).toBe(curl);
  else expect(shown).toMatch(curl);
  await page.getByRole('button', { name: 'Confirm' }).click();
  await page.waitForURL(back);
  return (await page.locator('.notice').textContent()) ?? '';
}

async function exercise(target: Target, screenshots: boolean): Promise<void> {
  const { url, db } = target;
  const flaky = `${f.endpoint.url}/flaky/${target.name}`;
  // Held slots: three keys and a keyless task, each leased by an endpoint that keeps it.
  const keep = (key: string | null, limit?: number) =>
    enqueue(target, {
      queue: 'reports',
      url: `${f.endpoint.url}/keep/${target.name}`,
      lease_ms: 600_000,
      ...(key === null ? {} : { concurrency_key: key }),
      ...(limit ? { concurrency_limit: limit } : {}),
    });
  const stuck = await keep('acme', 3);
  const held = [stuck, await keep('acme'), await keep('globex'), await keep('initech'), await keep(null)];
  // Its body holds markup, which the task's page must show as text.
  const body = { report: 7, note: '<img src=x onerror="alert(1)">' };
  const dead = await enqueue(target, { queue: 'reports', url: flaky, max_attempts: 1, body });
  await expect.poll(() => statusOf(db, [...held, dead]), { timeout: 15_000 }).toEqual([...held.map(() => 'leased'), 'dead']);
  const lease = (await row(db, stuck)).lease_id as string;

  const context: BrowserContext = await browser.newContext({ baseURL: url, viewport: { width: 1280, height: 900 } });
  try {
    const page = await context.newPage();
    const problems: string[] = [];
    // Script errors and policy violations; a refused login's status is logged too, and expected.
    page.on('console', (m) => void (m.type() === 'error' && !m.text().startsWith('Failed to load resource') && problems.push(m.text())));
    page.on('pageerror', (e) => void problems.push(e.message));

    // Signed out: the dashboard sends the browser to the login form.
    await page.goto('/dashboard');
    expect(new URL(page.url()).pathname).toBe('/dashboard/login');

    // A key without the admin scope is refused, and gets no session.
    await page.fill('#key', f.secrets.apiKey);
    const refused = page.waitForResponse((r) => r.url().endsWith('/dashboard/login') && r.request().method() === 'POST');
    await page.getByRole('button', { name: 'Sign in' }).click();
    expect((await refused).status()).toBe(403);
    expect(await page.locator('[role=alert]').textContent()).toContain('lacks the admin scope');
    expect((await context.cookies()).map((c) => c.name)).not.toContain('sluice_session');

    // An admin key signs in: a session cookie for /dashboard only, never readable by scripts.
    await page.fill('#key', admin.key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(/\/dashboard$/);
    const session = (await context.cookies()).find((c) => c.name === 'sluice_session');
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/dashboard', secure: false });
    expect((session?.expires ?? 0) * 1000 - Date.now()).toBeGreaterThan(11.9 * 3_600_000);
    expect((session?.expires ?? 0) * 1000 - Date.now()).toBeLessThan(12.1 * 3_600_000);

    // The queues page: counts, limits and their sources.
    const reportsRow = page.locator('tr[data-queue="reports"]');
    expect(await reportsRow.textContent()).toMatch(/reports\s*0\s*5\s*1\s*/);
    expect(await reportsRow.textContent()).toContain('8 env');
    expect(await reportsRow.textContent()).toContain('100 per 1 min env');
    if (screenshots) await page.screenshot({ path: `${ROOT}docs/dashboard-queues.png`, clip: { x: 0, y: 0, width: 1280, height: 300 } });

    // The picture: the stuck task's slot, under its key, refreshed live (the script runs under the CSP).
    await reportsRow.getByRole('link', { name: 'reports' }).click();
    await page.waitForURL(/\/dashboard\/queues\/reports$/);
    const slot = page.locator(`li.slot[data-lease="${lease}"]`);
    expect(await slot.textContent()).toContain(`#${stuck}`);
    expect(await page.locator('.level[data-key="acme"]').textContent()).toMatch(/2\s*\/\s*3\s*task/);
    await page.waitForResponse((r) => r.url().endsWith('/dashboard/queues/reports/live') && r.status() === 200);
    if (screenshots) await page.screenshot({ path: `${ROOT}docs/dashboard-slots.png`, fullPage: true });

    // Force-release it: the lease ends as released, its attempt given back.
    await slot.getByRole('link', { name: 'Force release…' }).click();
    const released = await confirm(
      page,
      `curl -s -X POST '${url}/v1/queues/reports/leases/${lease}/release' -H "authorization: Bearer $SLUICE_API_KEY"`,
      /\/dashboard\/queues\/reports$/,
    );
    expect(released).toContain(`Released lease ${lease} of task #${stuck}`);
    expect(await db.query('select outcome, error from sluice.all_attempts where lease_id = $1', [lease])).toEqual([
      { outcome: 'released', error: 'lease released by an admin' },
    ]);
    expect((await row(db, stuck)).lease_id).not.toBe(lease);

    // Lower the key's limit from 3 (its first task's) to 1.
    const acme = page.locator('.level[data-key="acme"]');
    await acme.locator('input[name=limit]').fill('1');
    await acme.getByRole('button', { name: 'Set key limit…' }).click();
    await confirm(
      page,
      `curl -s -X PUT '${url}/v1/queues/reports/keys/acme' -H "authorization: Bearer $SLUICE_API_KEY" -H 'content-type: application/json' -d '{"limit":1}'`,
      /\/dashboard\/queues\/reports$/,
    );
    expect(await db.query(`select "limit" from sluice.key_limits where queue = 'reports' and concurrency_key = 'acme'`)).toEqual([
      { limit: 1 },
    ]);
    expect(await page.locator('.level[data-key="acme"]').textContent()).toContain('override');

    // Redrive the dead task from the dead letters: its second push succeeds.
    await page.getByRole('link', { name: 'Dead letters' }).click();
    await page.fill('input[name=queue]', 'reports');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.locator(`tr[data-task="${dead}"]`).getByRole('link', { name: 'Redrive…' }).click();
    await confirm(
      page,
      `curl -s -X POST '${url}/v1/tasks/${dead}/retry' -H "authorization: Bearer $SLUICE_API_KEY"`,
      new RegExp(`/dashboard/tasks/${dead}$`),
    );
    await expect.poll(() => statusOf(db, [dead]), { timeout: 10_000 }).toEqual(['succeeded']);

    // The task's page: its body (as text, escaped), result and both attempts.
    await page.reload();
    expect(await page.locator('pre').first().textContent()).toBe(JSON.stringify(body, null, 2));
    expect(await page.locator('main img').count()).toBe(0);
    expect(await page.locator('tbody tr').allTextContents()).toEqual([
      expect.stringMatching(/^1\s*dead\s*500/),
      expect.stringMatching(/^1\s*succeeded\s*200/),
    ]);

    // On a narrow screen (420 px) no page is wider than the screen: tables scroll within themselves.
    await page.setViewportSize({ width: 420, height: 900 });
    for (const path of [
      '/dashboard',
      '/dashboard/queues/reports',
      `/dashboard/tasks/${dead}`,
      '/dashboard/dead',
      '/dashboard/waiting',
      '/dashboard/endpoints',
    ]) {
      await page.goto(path);
      const [scrollWidth, innerWidth] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
      expect(scrollWidth, `${path} at 420 px`).toBeLessThanOrEqual(innerWidth);
    }
    await page.setViewportSize({ width: 1280, height: 900 });

    // Redrive all that match: two more dead tasks.
    const more = [
      await enqueue(target, { queue: 'reports', url: flaky, max_attempts: 1 }),
      await enqueue(target, { queue: 'reports', url: flaky, max_attempts: 1 }),
    ];
    await expect.poll(() => statusOf(db, more), { timeout: 10_000 }).toEqual(['dead', 'dead']);
    await page.goto('/dashboard/dead?queue=reports');
    expect(await page.locator('.panel.actions').textContent()).toContain('2 dead tasks match');
    await page.getByRole('link', { name: 'Redrive all matching…' }).click();
    expect(await confirm(page, /\/v1\/tasks\?status=dead&limit=500&queue=reports/, /\/dashboard\/dead\?queue=reports$/)).toContain(
      'Redrove 2 dead tasks',
    );
    await expect.poll(() => statusOf(db, more), { timeout: 10_000 }).toEqual(['succeeded', 'succeeded']);

    // The endpoints page: the test endpoint's origin, its failed first pushes counted; pause it by hand, then resume it.
    const origin = new URL(f.endpoint.url).origin;
    await page.getByRole('link', { name: 'Endpoints' }).click();
    await page.waitForURL(/\/dashboard\/endpoints$/);
    const originRow = page.locator(`tr[data-origin="${origin}"]`);
    expect(await originRow.locator('td').nth(4).textContent()).toMatch(/^[1-9]\d*$/);
    await originRow.getByRole('link', { name: 'Pause…' }).click();
    const pausedNotice = await confirm(
      page,
      `curl -s -X POST '${url}/v1/endpoints/${encodeURIComponent(origin)}/pause' -H "authorization: Bearer $SLUICE_API_KEY"`,
      /\/dashboard\/endpoints$/,
    );
    expect(pausedNotice).toContain(`Endpoint ${origin} is paused by hand.`);
    expect(await originRow.textContent()).toContain('paused by hand');
    await originRow.getByRole('link', { name: 'Resume…' }).click();
    await confirm(page, new RegExp(`/v1/endpoints/${encodeURIComponent(origin)}/resume`), /\/dashboard\/endpoints$/);
    expect(await db.query('select paused_by from sluice.endpoints where origin = $1', [origin])).toEqual([{ paused_by: null }]);

    // Replay by filter: two tasks died at the flaky path; the form counts them first, then redrives them.
    const replayed = [
      await enqueue(target, { queue: 'replayed', url: `${flaky}/replay`, max_attempts: 1 }),
      await enqueue(target, { queue: 'replayed', url: `${flaky}/replay`, max_attempts: 1 }),
    ];
    await expect.poll(() => statusOf(db, replayed), { timeout: 10_000 }).toEqual(['dead', 'dead']);
    await page.fill('input[name=url_prefix]', `${flaky}/replay`);
    await page.fill('input[name=since]', new Date(Date.now() - 600_000).toISOString());
    await page.getByRole('button', { name: 'Count…' }).click();
    await page.waitForURL(/\/dashboard\/confirm\/redrive-matching/);
    expect(await page.locator('h1').textContent()).toBe('Redrive 2 dead tasks that match?');
    expect(await statusOf(db, replayed)).toEqual(['dead', 'dead']);
    expect(await confirm(page, /\/v1\/tasks\/redrive' .*"url_prefix":/, /\/dashboard\/endpoints$/)).toBe('Redrove 2 dead tasks.');
    await expect.poll(() => statusOf(db, replayed), { timeout: 10_000 }).toEqual(['succeeded', 'succeeded']);

    // The waiting-time page reads the histogram the dispatchers wrote.
    await page.getByRole('link', { name: 'Waiting time' }).click();
    const waitingRows = async () => {
      await page.reload();
      return page.locator('tr[data-queue="reports"]').count();
    };
    await expect.poll(waitingRows, { timeout: 10_000 }).toBe(1);

    // A POST that does not come from a page of this host is refused, with the session cookie or not.
    const cookie = `sluice_session=${session?.value}`;
    const pause = (headers: Record<string, string>) =>
      fetch(`${url}/dashboard/actions/pause`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: 'queue=reports',
      });
    const paused = async () =>
      (await db.query<{ paused: boolean }>(`select paused from sluice.queues where name = 'reports'`))[0]?.paused ?? null;
    expect((await pause({ origin: 'https://evil.example' })).status).toBe(403);
    expect((await pause({ 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    expect((await pause({ referer: 'https://evil.example/page' })).status).toBe(403);
    expect((await pause({})).status).toBe(403);
    expect(await paused()).toBe(null);
    // The same request from this host's page does it (so the refusals above were the origin's).
    expect((await pause({ origin: url })).status).toBe(303);
    expect(await paused()).toBe(true);

    // Signing out clears the cookie; the pages send the browser to the login form again.
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL(/\/dashboard\/login$/);
    expect((await context.cookies()).map((c) => c.name)).not.toContain('sluice_session');
    expect(problems).toEqual([]);
  } finally {
    await context.close();
  }
}

async function checkHeaders(url: string): Promise<void> {
  const res = await fetch(`${url}/dashboard/login`);
  expect(res.status).toBe(200);
  const policy = res.headers.get('content-security-policy') ?? '';
  expect(policy).toMatch(/script-src 'sha256-[A-Za-z0-9+/]+=*';/);
  expect(policy).toContain("frame-ancestors 'none'");
  expect(policy).not.toContain('unsafe-inline');
  expect(res.headers.get('x-content-type-options')).toBe('nosniff');
  expect(res.headers.get('x-frame-options')).toBe('DENY');
  // A bad key goes through the API's brake: a 401 now, and counted.
  const bad = await fetch(`${url}/dashboard/login`, {
    method: 'POST',
    headers: { origin: url, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'key=sk_sluice_not-a-key',
  });
  expect(bad.status).toBe(401);
  expect(bad.headers.get('set-cookie')).toBe(null);
}

describe('the dashboard in a browser', () => {
  it('on the Worker', async () => {
    await checkHeaders(f.worker.url);
    await exercise({ name: 'worker', url: f.worker.url, db: f.t.db }, SCREENSHOTS);
  }, 120_000);

  describe('on the Node server', () => {
    let t: TestDatabase;
    let node: NodeSluice;
    beforeAll(async () => {
      t = await createTestDatabase();
      node = await startNodeSluice({ env: testEnv(f.secrets, t.url, vars(f.secrets.apiKeysJson)), maxSleepMs: 60_000 });
    });
    afterAll(async () => {
      await node?.close();
      await t?.drop();
    });

    it('does the same', async () => {
      await checkHeaders(node.url);
      await exercise({ name: 'node', url: node.url, db: t.db }, false);
    }, 120_000);
  });
});
