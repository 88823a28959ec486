/** Limits set by wrangler vars, and the queue API, through the real Worker in workerd. */
import { beforeAll, describe, expect, it } from 'vitest';
import type { RunningWorker } from '../../src/node/worker-runtime.ts';
import { webhookSecretBytes } from '../../src/protocol/webhook.ts';
import { type ApiKeyEntry, generateApiKey } from '../../src/security/api-keys.ts';
import { endpointWebhookSecret } from '../../src/security/webhook-secrets.ts';
import type { TestSecrets } from '../helpers/config.ts';
import type { TestEndpoint } from '../helpers/endpoint.ts';
import { useWorkerFixture } from '../helpers/worker-fixture.ts';

const admin: { key: string; entry: ApiKeyEntry } = await generateApiKey('admin', ['admin']);
const WEBHOOK_MASTER = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const f = useWorkerFixture((f) => ({
  SLUICE_API_KEYS: JSON.stringify([...JSON.parse(f.secrets.apiKeysJson), admin.entry]),
  SLUICE_CLUSTER_CAP: '3',
  SLUICE_WEBHOOK_SECRET: WEBHOOK_MASTER,
  SLUICE_QUEUES: JSON.stringify({ tenants: { key_concurrency: 1, key_from: 'customer.id', concurrency: 2 } }),
}));
let worker: RunningWorker;
let endpoint: TestEndpoint;
let secrets: TestSecrets;
const adminKey = admin.key;
beforeAll(() => {
  ({ worker, endpoint, secrets } = f);
});

function api(path: string, init: RequestInit & { key?: string } = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set('authorization', `Bearer ${init.key ?? secrets.apiKey}`);
  if (init.body !== undefined) headers.set('content-type', 'application/json');
  return fetch(`${worker.url}${path}`, { ...init, headers });
}

describe('limits from wrangler vars, through the Worker', () => {
  it('derive keys with key_from, hold the key and queue limits, and show who holds each slot', async () => {
    // The endpoint holds every push until released, so the slots stay taken.
    const release: Array<() => void> = [];
    endpoint.reply(() => new Promise((resolve) => release.push(() => resolve({ status: 200 }))));
    const enqueue = (customer: string | undefined) =>
      api('/v1/tasks', {
        method: 'POST',
        body: JSON.stringify({ queue: 'tenants', url: `${endpoint.url}/t`, body: customer ? { customer: { id: customer } } : {} }),
      });
    for (const c of ['acme', 'acme', 'acme', 'globex', 'initech', undefined]) expect((await enqueue(c)).status).toBe(201);

    await endpoint.waitFor(2);
    await new Promise((r) => setTimeout(r, 300));
    // Queue concurrency 2, one per customer: acme and one other, never two acme.
    expect(endpoint.received).toHaveLength(2);
    const keys = endpoint.received.map((p) => decodeURIComponent(p.headers['sluice-concurrency-key'] as string));
    expect(new Set(keys).size).toBe(2);

    const status = (await (await api('/v1/queues/tenants/concurrency')).json()) as {
      cluster: { limit: number; active: number };
      queue_level: { limit: number; source: string; active: number };
      keys: Array<{ key: string; limit: number; source: string; active: number; slots: Array<{ task_id: string; lease_id: string }> }>;
    };
    expect(status.cluster).toMatchObject({ limit: 3, active: 2 });
    expect(status.queue_level).toMatchObject({ limit: 2, source: 'env', active: 2 });
    const held = status.keys.filter((k) => k.active > 0);
    expect(held).toHaveLength(2);
    for (const k of held)
      expect(k).toMatchObject({ limit: 1, source: 'env', active: 1, slots: [expect.objectContaining({ lease_id: expect.any(String) })] });

    // Raise the queue limit at run time: the cluster cap (3) is now the binding one.
    const put = await api('/v1/queues/tenants', { method: 'PUT', key: adminKey, body: JSON.stringify({ concurrency: 10 }) });
    expect(put.status).toBe(200);
    expect(await put.json()).toMatchObject({
      concurrency: { value: 10, source: 'override' },
      key_concurrency: { value: 1, source: 'env' },
      key_from: 'customer.id',
    });
    // The PUT pokes the dispatcher: no cron is needed.
    await endpoint.waitFor(3);
    await new Promise((r) => setTimeout(r, 200));
    expect(endpoint.received).toHaveLength(3);

    // An admin frees a stuck slot: its task goes back to pending without using an attempt.
    const again = (await (await api('/v1/queues/tenants/concurrency')).json()) as typeof status;
    const slot = again.keys.flatMap((k) => k.slots)[0]!;
    const freed = await api(`/v1/queues/tenants/leases/${slot.lease_id}/release`, { method: 'POST', key: adminKey });
    expect(await freed.json()).toEqual({ released: true, task_id: slot.task_id, lease_id: slot.lease_id });
    const task = (await (await api(`/v1/tasks/${slot.task_id}`)).json()) as { attempts: number; last_error: string };
    expect(task).toMatchObject({ last_error: 'lease released by an admin', attempts: 0 });

    // Let everything through: each settle frees a slot the shard claims again, no cron needed.
    endpoint.reply(() => ({ status: 200 }));
    for (const r of release.splice(0)) r();
    await expect
      .poll(async () => ((await (await api('/v1/tasks?queue=tenants&status=succeeded')).json()) as { tasks: unknown[] }).tasks.length, {
        timeout: 10_000,
      })
      .toBe(6);
    const done = (await (await api('/v1/tasks?queue=tenants&status=succeeded')).json()) as { tasks: unknown[] };
    expect(done.tasks).toHaveLength(6);
  });

  it('answers the queue API with sources, and refuses writes without the admin scope', async () => {
    const list = (await (await api('/v1/queues')).json()) as { queues: Array<{ name: string }> };
    expect(list.queues.map((q) => q.name)).toContain('tenants');
    expect((await api('/v1/queues/tenants', { method: 'PUT', body: JSON.stringify({ concurrency: 1 }) })).status).toBe(403);
    const bad = await api('/v1/queues/tenants', { method: 'PUT', key: adminKey, body: JSON.stringify({ concurrency: 0, speed: 'fast' }) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { issues: Array<{ path: string }> }).issues.map((i) => i.path).sort()).toEqual(['concurrency', 'speed']);
    expect((await api('/v1/queues/tenants/keys/acme', { method: 'PUT', key: adminKey, body: JSON.stringify({ limit: 2 }) })).status).toBe(
      200,
    );
    const status = (await (await api('/v1/queues/tenants/concurrency')).json()) as {
      keys: Array<{ key: string; limit: number; source: string }>;
    };
    expect(status.keys.find((k) => k.key === 'acme')).toMatchObject({ limit: 2, source: 'override' });
    expect((await api('/v1/queues/tenants/keys/acme', { method: 'DELETE', key: adminKey })).status).toBe(204);
    expect((await api('/v1/queues/tenants/keys/acme', { method: 'DELETE', key: adminKey })).status).toBe(404);
    expect((await api('/v1/queues/tenants/pause', { method: 'POST', key: adminKey })).status).toBe(200);
    expect(await (await api('/v1/queues/tenants')).json()).toMatchObject({ paused: { value: true, source: 'override' } });
    expect((await api('/v1/queues/tenants', { method: 'DELETE', key: adminKey })).status).toBe(200);
    expect(await (await api('/v1/queues/tenants')).json()).toMatchObject({
      paused: { value: false, source: 'default' },
      concurrency: { value: 2, source: 'env' },
    });
    expect((await api('/v1/queues/bad name!')).status).toBe(400);
    expect((await api('/v1/queues/tenants/leases/not-a-uuid/release', { method: 'POST', key: adminKey })).status).toBe(404);
  });
});

describe('webhook secrets, through the Worker', () => {
  it("gives an admin an endpoint's own Standard Webhooks secret, and no one else", async () => {
    const path = `/v1/webhooks/secret?url=${encodeURIComponent('https://example.com/hooks/a?x=1')}`;
    const res = await api(path, { key: adminKey });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      endpoint: 'https://example.com/hooks/a',
      secret: await endpointWebhookSecret(webhookSecretBytes(WEBHOOK_MASTER), 'https://example.com/hooks/a'),
    });
    expect((await api(path)).status).toBe(403);
    expect((await api('/v1/webhooks/secret?url=ftp%3A%2F%2Fx', { key: adminKey })).status).toBe(400);
  });
});
