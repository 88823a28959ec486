/**
 * Replay (POST /v1/tasks/redrive) on the real Worker in workerd and on the Node server: the dead
 * tasks that match a queue, a URL prefix and when they died are redriven, or counted with
 * `dry_run`; a bad value of any field is a 400 naming it.
 */
import { describe, expect, it } from 'vitest';
import { SluiceClient } from '../../src/sdk/client.ts';
import type { TestDatabase } from '../helpers/db.ts';
import { apiCall, useNodeBeside, useWorkerFixture } from '../helpers/worker-fixture.ts';

const f = useWorkerFixture();

async function replay(base: string, db: TestDatabase['db']) {
  const key = f.secrets.apiKey;
  f.endpoint.reply((push) => (push.path.startsWith('/down') ? { status: 500 } : { status: 200 }));
  const dead = (path: string, queue = 'replay') => ({ queue, url: `${f.endpoint.url}${path}`, max_attempts: 1 });
  const batch = await apiCall(base, key, 'POST', '/v1/tasks/batch', {
    tasks: [dead('/down/1'), dead('/down/2'), dead('/down/3', 'other'), dead('/gone/1')],
  });
  expect(batch.status).toBe(201);
  const deadCount = async () =>
    (
      await db.query<{ n: number }>(
        `select count(*)::int as n from sluice.all_tasks where status = 'dead' and queue in ('replay', 'other')`,
      )
    )[0]!.n;
  f.endpoint.reply((push) => (push.path.startsWith('/down') || push.path.startsWith('/gone') ? { status: 500 } : { status: 200 }));
  await expect.poll(deadCount, { timeout: 15_000 }).toBe(4);
  f.endpoint.reply(() => ({ status: 200 }));

  // Bad values, each named.
  for (const [body, path] of [
    [{ queue: 'no spaces' }, 'queue'],
    [{ url_prefix: '' }, 'url_prefix'],
    [{ url_prefix: 'https://a.example/\u0000' }, 'url_prefix'],
    [{ since: 'yesterday' }, 'since'],
    [{ until: 12 }, 'until'],
    [{ since: '2030-01-02T00:00:00Z', until: '2030-01-01T00:00:00Z' }, 'until'],
    [{ dry_run: 'yes' }, 'dry_run'],
    [{ after: 'x' }, 'after'],
    [{ urls: [] }, 'urls'],
  ] as const) {
    const refused = await apiCall(base, key, 'POST', '/v1/tasks/redrive', body);
    expect(refused.status, JSON.stringify(body)).toBe(400);
    expect((refused.body.issues as Array<{ path: string }>).map((i) => i.path)).toContain(path);
  }

  // A dry run counts and changes nothing.
  const prefix = `${f.endpoint.url}/down`;
  const counted = await apiCall(base, key, 'POST', '/v1/tasks/redrive', { queue: 'replay', url_prefix: prefix, dry_run: true });
  expect(counted).toEqual({ status: 200, body: { matched: 2, redriven: 0, skipped: 0, more: false, last_id: null, dry_run: true } });
  // The SDK's client makes the same call.
  const sdk = new SluiceClient({ baseUrl: base, apiKey: key });
  expect(await sdk.redrive({ queue: 'replay', url_prefix: prefix, dry_run: true })).toEqual(counted.body);
  expect(await deadCount()).toBe(4);
  // Nothing died in the future.
  const later = await apiCall(base, key, 'POST', '/v1/tasks/redrive', {
    since: new Date(Date.now() + 3_600_000).toISOString(),
    dry_run: true,
  });
  expect(later.body.matched).toBe(0);

  // The real thing: the two of queue replay under /down, pushed again and done.
  const done = await apiCall(base, key, 'POST', '/v1/tasks/redrive', {
    queue: 'replay',
    url_prefix: prefix,
    until: new Date(Date.now() + 60_000).toISOString(),
  });
  expect(done.status).toBe(200);
  expect(done.body).toMatchObject({ matched: 2, redriven: 2, skipped: 0, more: false, dry_run: false });
  await expect
    .poll(
      async () =>
        (
          await db.query<{ status: string; url: string }>(
            `select status, url from sluice.all_tasks where queue in ('replay', 'other') order by url`,
          )
        ).map((r) => `${new URL(r.url).pathname} ${r.status}`),
      { timeout: 15_000 },
    )
    .toEqual(['/down/1 succeeded', '/down/2 succeeded', '/down/3 dead', '/gone/1 dead']);
}

describe('replay: POST /v1/tasks/redrive', () => {
  it('on the Worker', async () => {
    await replay(f.worker.url, f.t.db);
  });
  describe('on the Node server', () => {
    const side = useNodeBeside(f);
    it('the same', async () => {
      await replay(side.node.url, side.t.db);
    });
  });
});
