/**
 * The dashboard's pure parts: sessions (MAC, expiry, the key they name), the forgery check,
 * quantiles from histogram buckets, and the cookie's Secure flag over https (the browser test
 * runs over http).
 */
import type { JWK } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/api/app.ts';
import { bar } from '../../src/api/dashboard/format.ts';
import { sameOrigin } from '../../src/api/dashboard/guard.ts';
import { endpointsView, worstFirst } from '../../src/api/dashboard/pages/endpoints.ts';
import { groupsView } from '../../src/api/dashboard/pages/groups.ts';
import { taskPage } from '../../src/api/dashboard/pages/tasks.ts';
import { quantile } from '../../src/api/dashboard/quantiles.ts';
import { SESSION_TTL_MS, signSession, verifySession } from '../../src/api/dashboard/session.ts';
import type { Task } from '../../src/core/types.ts';
import type { EndpointHealthRow } from '../../src/db/endpoints.ts';
import { type ApiKeyEntry, generateApiKey } from '../../src/security/api-keys.ts';
import { generateSigningJwk, loadKeyring } from '../../src/security/keyring.ts';
import { signLeaseToken } from '../../src/security/lease-token.ts';

const NOW = Date.UTC(2026, 10, 23, 12);
let a: JWK;
let b: JWK;
let admin: { key: string; entry: ApiKeyEntry };
let writer: { key: string; entry: ApiKeyEntry };

beforeAll(async () => {
  [a, b, admin, writer] = await Promise.all([
    generateSigningJwk('EdDSA', 'a'),
    generateSigningJwk('ES256', 'b'),
    generateApiKey('ops', ['admin']),
    generateApiKey('writer', ['tasks:write']),
  ]);
});

describe('dashboard sessions', () => {
  it('name the admin key they were made for, until they expire', () => {
    const token = signSession({ keys: [a] }, admin.entry, NOW);
    expect(verifySession({ keys: [a] }, [writer.entry, admin.entry], token, NOW)).toEqual(admin.entry);
    expect(verifySession({ keys: [a] }, [admin.entry], token, NOW + SESSION_TTL_MS - 1_000)).toEqual(admin.entry);
    expect(verifySession({ keys: [a] }, [admin.entry], token, NOW + SESSION_TTL_MS)).toBeNull();
  });

  it('end when their key is removed, replaced, loses the admin scope or is limited to queues', () => {
    const token = signSession({ keys: [a] }, admin.entry, NOW);
    expect(verifySession({ keys: [a] }, [writer.entry], token, NOW)).toBeNull();
    expect(verifySession({ keys: [a] }, [{ ...writer.entry, name: 'ops', scopes: ['admin'] }], token, NOW)).toBeNull();
    expect(verifySession({ keys: [a] }, [{ ...admin.entry, scopes: ['tasks:read'] }], token, NOW)).toBeNull();
    // The dashboard shows every queue: a key limited to some may not keep a session.
    expect(verifySession({ keys: [a] }, [{ ...admin.entry, queues: ['billing'] }], token, NOW)).toBeNull();
  });

  it('survive a rotation while their signing key is listed, and not after', () => {
    const token = signSession({ keys: [a] }, admin.entry, NOW);
    expect(verifySession({ keys: [b, a] }, [admin.entry], token, NOW)).toEqual(admin.entry);
    expect(verifySession({ keys: [b] }, [admin.entry], token, NOW)).toBeNull();
  });

  it('cannot be forged, altered or stood in for by a lease token', async () => {
    const token = signSession({ keys: [a] }, admin.entry, NOW);
    const [body, mac] = token.split('.') as [string, string];
    const payload = JSON.parse(atob(body.replace(/-/g, '+').replace(/_/g, '/'))) as { exp: number };
    const longer = btoa(JSON.stringify({ ...payload, exp: payload.exp + 3_600 })).replace(/=+$/, '');
    expect(verifySession({ keys: [a] }, [admin.entry], `${longer}.${mac}`, NOW)).toBeNull();
    expect(verifySession({ keys: [a] }, [admin.entry], `${body}.${mac.slice(1)}A`, NOW)).toBeNull();
    expect(verifySession({ keys: [a] }, [admin.entry], 'not-a-session', NOW)).toBeNull();
    // The same kid on another key: its MAC does not verify.
    const other = await generateSigningJwk('EdDSA', 'a');
    expect(verifySession({ keys: [other] }, [admin.entry], token, NOW)).toBeNull();
    // A lease token has the same shape and comes from the same signing key, under another derived key.
    const lease = await signLeaseToken(await loadKeyring({ keys: [a] }), { taskId: '1', leaseId: 'x' }, NOW + 60_000, 'sluice');
    expect(verifySession({ keys: [a] }, [admin.entry], lease, NOW)).toBeNull();
  });
});

describe('the forgery check', () => {
  const post = (headers: Record<string, string>) =>
    new Request('http://127.0.0.1:8787/dashboard/actions/pause', { method: 'POST', headers });
  const here = (headers: Record<string, string>) => sameOrigin(post(headers), null);

  it('takes a POST whose Origin, else Sec-Fetch-Site, else Referer is this host', () => {
    expect(here({ origin: 'http://127.0.0.1:8787' })).toBe(true);
    expect(here({ 'sec-fetch-site': 'same-origin' })).toBe(true);
    expect(here({ referer: 'http://127.0.0.1:8787/dashboard/confirm/pause?queue=a' })).toBe(true);
    // Behind a TLS-terminating proxy the browser's origin is https: the host decides.
    expect(here({ origin: 'https://127.0.0.1:8787' })).toBe(true);
  });

  it('refuses any other, and a POST that names none', () => {
    expect(here({ origin: 'http://127.0.0.1:8788' })).toBe(false);
    expect(here({ origin: 'null' })).toBe(false);
    expect(here({ origin: 'http://evil.example', 'sec-fetch-site': 'same-origin' })).toBe(false);
    expect(here({ 'sec-fetch-site': 'same-site' })).toBe(false);
    expect(here({ referer: 'http://127.0.0.1.evil.example/' })).toBe(false);
    expect(here({})).toBe(false);
  });

  it('with a public URL (a proxy that rewrites Host), takes that origin exactly, and no other', () => {
    const behind = (headers: Record<string, string>) => sameOrigin(post(headers), 'https://sluice.example.com');
    expect(behind({ origin: 'https://sluice.example.com' })).toBe(true);
    expect(behind({ referer: 'https://sluice.example.com/dashboard/confirm/pause?queue=a' })).toBe(true);
    expect(behind({ 'sec-fetch-site': 'same-origin' })).toBe(true);
    expect(behind({ origin: 'http://sluice.example.com' })).toBe(false);
    expect(behind({ origin: 'https://sluice.example.com:8443' })).toBe(false);
    expect(behind({ origin: 'http://127.0.0.1:8787' })).toBe(false);
    expect(behind({ referer: 'https://sluice.example.com.evil.example/' })).toBe(false);
  });
});

describe('quantiles from buckets', () => {
  const bounds = [0.1, 1, 10];

  it('interpolate within the bucket the rank falls in', () => {
    expect(quantile(0.5, bounds, [0, 10, 0, 0])).toEqual({ seconds: 0.55, atLeast: false });
    expect(quantile(0.5, bounds, [10, 0, 0, 0])).toEqual({ seconds: 0.05, atLeast: false });
    expect(quantile(0.9, bounds, [5, 4, 1, 0])?.seconds).toBeCloseTo(1, 10);
    expect(quantile(0.95, bounds, [5, 4, 1, 0])?.seconds).toBeCloseTo(5.5, 10);
  });

  it('say "at least" beyond the last bound, and nothing when empty', () => {
    expect(quantile(0.99, bounds, [1, 0, 0, 9])).toEqual({ seconds: 10, atLeast: true });
    expect(quantile(0.5, bounds, [0, 0, 0, 0])).toBeNull();
  });
});

describe('the session cookie', () => {
  async function login(url: string) {
    const env = {
      DATABASE_URL: 'postgres://unused.invalid/sluice',
      SLUICE_API_KEYS: JSON.stringify([admin.entry]),
      SLUICE_SIGNING_KEYS: JSON.stringify({ keys: [a] }),
    };
    const app = createApp({
      openDb: () => {
        throw new Error('a login reads no database');
      },
      clientAddress: () => '192.0.2.1',
      poke: () => {},
      awaitWork: async () => {},
    });
    const origin = new URL(url).origin;
    const res = await app.request(
      url,
      { method: 'POST', headers: { origin, 'content-type': 'application/x-www-form-urlencoded' }, body: `key=${admin.key}` },
      env,
      { waitUntil: () => {}, passThroughOnException: () => {}, props: {} },
    );
    expect(res.status).toBe(303);
    return res.headers.get('set-cookie') ?? '';
  }

  it('is Secure over https, HttpOnly, SameSite=Strict and for /dashboard only', async () => {
    const cookie = await login('https://sluice.example/dashboard/login');
    expect(cookie).toMatch(/^sluice_session=[\w-]+\.[\w-]+; Max-Age=43200; Path=\/dashboard; HttpOnly; Secure; SameSite=Strict$/);
    expect(await login('http://127.0.0.1:8787/dashboard/login')).not.toContain('Secure');
  });
});

describe("a task's page", () => {
  const at = new Date(NOW);
  // A task that failed once (HTTP 500) and then succeeded (HTTP 200).
  const task: Task = {
    id: '7',
    queue: 'emails',
    status: 'succeeded',
    url: 'https://example.com/hook',
    method: 'POST',
    headers: {},
    body: '{}',
    contentType: 'application/json',
    concurrencyKey: null,
    concurrencyLimit: null,
    parentId: null,
    resumes: 0,
    rateLimit: null,
    priority: 0,
    runAt: at,
    expiresAt: null,
    attempts: 2,
    maxAttempts: 5,
    backoff: { initialMs: 1_000, maxMs: 3_600_000, factor: 2, jitter: 0.25 },
    deferrals: 0,
    timeoutMs: 30_000,
    leaseMs: 60_000,
    dedupKey: null,
    dedupTtlMs: null,
    lease: null,
    cancelRequestedAt: null,
    result: 'ok',
    lastError: 'HTTP 500: boom',
    lastStatus: 200,
    createdAt: at,
    updatedAt: at,
    finishedAt: at,
    schedule: null,
    callbackUrl: null,
    failureCallbackUrl: null,
  };

  it('does not pin an earlier error on the status that ended it, and says the time zone of its times', () => {
    const page = String(taskPage(task, [], at));
    expect(page).toContain('<dt>Error before it succeeded</dt><dd>HTTP 500: boom</dd>');
    expect(page).toContain('<dt>Last HTTP status</dt><dd>200</dd>');
    expect(page).not.toContain('(HTTP 200)');
    expect(page).toContain('2026-11-23 12:00:00 UTC</time>');
    expect(page).toContain('<dt>Trace</dt><dd><span class="muted">none</span>');
    expect(page).toContain('<dt>Callbacks</dt><dd><span class="muted">none</span>');
  });

  it('shows the trace a task runs in and whom it tells when done', () => {
    const traced = {
      ...task,
      headers: { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
      callbackUrl: 'https://example.com/done',
      failureCallbackUrl: 'https://example.com/alerts',
    };
    const page = String(taskPage(traced, [], at));
    expect(page).toContain('<dt>Trace</dt><dd><code>4bf92f3577b34da6a3ce929d0e0e4736</code>');
    expect(page).toContain('on success <code>https://example.com/done</code>');
    expect(page).toContain('on death <code>https://example.com/alerts</code>');
  });
});

describe('a level of slots', () => {
  it('draws no bar when it has no limit (nothing to fill), and a share of the limit when it has one', () => {
    expect(String(bar(4, null, 'Cluster'))).toBe('');
    expect(String(bar(2, 4, 'Queue'))).toContain('<rect class="held" width="160"');
    expect(String(bar(6, 4, 'Queue'))).toContain('<rect class="over"');
  });
});

describe('the endpoints page', () => {
  const at = new Date(NOW);
  const origin = (o: string, more: Partial<EndpointHealthRow> = {}): EndpointHealthRow => ({
    origin: o,
    state: 'healthy',
    consecutiveFailures: 0,
    attempts5m: 3,
    failures5m: 0,
    lastError: null,
    lastErrorAt: null,
    pausedUntil: null,
    pausedBy: null,
    heldUntil: null,
    failuresTotal: 0,
    ...more,
  });
  const down = origin('https://down.example', {
    state: 'paused',
    pausedBy: 'failures',
    consecutiveFailures: 10,
    failures5m: 10,
    pausedUntil: at,
    lastError: 'HTTP 502: <img src=x onerror="alert(1)">',
    lastErrorAt: at,
  });
  const byHand = origin('https://hand.example:8443', { state: 'paused', pausedBy: 'hand' });
  const probing = origin('https://probe.example', { state: 'probing', pausedBy: 'failures', pausedUntil: at, failures5m: 12 });
  const held = origin('https://held.example', { heldUntil: at });
  const fine = origin('https://fine.example', { failures5m: 1 });

  it('lists the origins not healthy first, then those failing most', () => {
    expect(worstFirst([fine, held, byHand, down, probing]).map((e) => e.origin)).toEqual([
      probing.origin,
      down.origin,
      byHand.origin,
      held.origin,
      fine.origin,
    ]);
  });

  it('shows each origin with its state, why it waits, its last error as text, and the actions that fit it', () => {
    const page = String(endpointsView([down, byHand, probing, held, fine], 7, ['emails']));
    const row = (o: string) => new RegExp(`<tr data-origin="${o}">([\\s\\S]*?)</tr>`).exec(page)?.[1] ?? '';
    expect(row(down.origin)).toContain('<span class="badge paused">paused</span>');
    expect(row(down.origin)).toContain('next probe at <time datetime="2026-11-23T12:00:00.000Z">');
    expect(row(down.origin)).toContain('HTTP 502: &lt;img src=x onerror=&quot;alert(1)&quot;&gt;');
    expect(page).not.toContain('<img');
    // Pause and resume go through their confirmations, the origin in the query.
    expect(row(down.origin)).toContain('href="/dashboard/confirm/endpoint-pause?origin=https%3A%2F%2Fdown.example"');
    expect(row(down.origin)).toContain('href="/dashboard/confirm/endpoint-resume?origin=https%3A%2F%2Fdown.example"');
    expect(row(down.origin)).toContain('href="/dashboard/confirm/redrive-matching?url_prefix=https%3A%2F%2Fdown.example%2F"');
    // Paused by hand: no probe, no second pause.
    expect(row(byHand.origin)).toContain('paused by hand');
    expect(row(byHand.origin)).toContain('until resumed');
    expect(row(byHand.origin)).not.toContain('endpoint-pause');
    expect(row(probing.origin)).toContain('probe out, its lease ends');
    // Healthy but held by a Retry-After: a resume ends the hold; a healthy origin has nothing to resume.
    expect(row(held.origin)).toContain('held by a Retry-After until');
    expect(row(held.origin)).toContain('endpoint-resume');
    expect(row(fine.origin)).not.toContain('endpoint-resume');
    expect(page).toContain('The first 5 of 7');
    // The replay form asks the confirmation page, which counts before anything is redriven.
    expect(page).toContain('<form class="filters" method="get" action="/dashboard/confirm/redrive-matching">');
    for (const field of ['queue', 'url_prefix', 'since', 'until']) expect(page).toContain(`name="${field}"`);
  });
});

describe('the groups page', () => {
  it('lists each group with its URLs, escaped, and says when more are not shown', () => {
    const at = new Date('2026-11-29T10:00:00Z');
    const group = {
      name: 'billing',
      urls: ['https://a.example.com/hook?x=1&y=<2>', 'https://b.example.com/hook'],
      createdAt: at,
      updatedAt: at,
    };
    const page = String(groupsView([group], true));
    expect(page).toContain('<td><b>billing</b></td>');
    expect(page).toContain('<code>https://a.example.com/hook?x=1&amp;y=&lt;2&gt;</code><br><code>https://b.example.com/hook</code>');
    expect(page).toContain('<td class="n">2</td>');
    expect(page).toContain('The first 1 by name');
    expect(String(groupsView([], false))).toContain('No groups yet.');
  });
});
