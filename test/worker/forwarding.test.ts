/**
 * A pull key's `push_to` (SECURITY.md, "Pull consumers"), on the real Worker in workerd and on
 * the Node server: a pull may be forwarded only to this machine, or to an origin its key lists;
 * a forwarded push never verifies as a production push (JWKS, the SDK's receiver, the
 * endpoint's Standard Webhooks secret), and verifies where a development handler trusts it.
 */
import { createLocalJWKSet, type JSONWebKeySet } from 'jose';
import { describe, expect, it } from 'vitest';
import { SignatureError, verifyPush } from '../../src/protocol/signature.ts';
import { verifyWebhook, webhookSecretBytes } from '../../src/protocol/webhook.ts';
import { createReceiver } from '../../src/sdk/receiver.ts';
import { generateApiKey } from '../../src/security/api-keys.ts';
import { endpointWebhookKey } from '../../src/security/webhook-secrets.ts';
import type { TestDatabase } from '../helpers/db.ts';
import { apiCall, useNodeBeside, useWorkerFixture, type WorkerFixture } from '../helpers/worker-fixture.ts';

const MASTER = `whsec_${btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))))}`;
/** A pull key that may forward to one remote origin too. */
const forwarder = await generateApiKey('forwarder', ['tasks:pull']);
const vars = (f: WorkerFixture) => ({
  SLUICE_QUEUES: JSON.stringify({ dev: { pull: true } }),
  SLUICE_WEBHOOK_SECRET: MASTER,
  SLUICE_API_KEYS: JSON.stringify([...JSON.parse(f.secrets.apiKeysJson), { ...forwarder.entry, forward_to: ['https://dev.example.com'] }]),
});
const f = useWorkerFixture(vars);

interface Pulled {
  id: string;
  lease: { id: string; token: string };
  push: { url: string; method: string; headers: Record<string, string>; body_text: string };
}

const REFUSED = [
  'https://victim.example/hook',
  'http://10.0.0.5/internal/admin',
  'http://169.254.169.254/latest/meta-data/',
  'https://dev.example.com/hook',
  'http://localhost:3000/task?x=1#top',
];

async function exercise(base: string, db: TestDatabase['db']) {
  const pullKey = f.secrets.pullKey;
  const enqueued = await apiCall(base, f.secrets.apiKey, 'POST', '/v1/tasks', { queue: 'dev', body: { n: 1 } });
  expect(enqueued.status).toBe(201);

  // Anything but this machine is refused, naming the rule, and leases nothing.
  for (const url of REFUSED) {
    const refused = await apiCall(base, pullKey, 'POST', '/v1/queues/dev/lease', { push_to: url });
    expect(refused.status, url).toBe(400);
    expect(refused.body.issues).toEqual([
      { path: 'push_to', message: expect.stringMatching(url.includes('#') ? /^must not have a fragment/ : /^must be a loopback URL/) },
    ]);
    const trust = await apiCall(base, pullKey, 'GET', `/v1/webhooks/forwarding?url=${encodeURIComponent(url)}`);
    expect(trust.status, url).toBe(400);
  }
  const untouched = await db.query<{ status: string; attempts: number }>('select status, attempts from sluice.all_tasks where id = $1', [
    enqueued.body.id,
  ]);
  expect(untouched).toEqual([{ status: 'pending', attempts: 0 }]);

  // A loopback URL is forwarded to, as a forwarded push.
  const url = 'http://localhost:3000/task?x=1';
  const pulled = await apiCall(base, pullKey, 'POST', '/v1/queues/dev/lease', { push_to: url });
  expect(pulled.status).toBe(200);
  const [task] = pulled.body.tasks as Pulled[];
  const { push } = task!;
  const body = new TextEncoder().encode(push.body_text);
  const request = () => new Request(url, { method: 'POST', headers: push.headers, body });

  // It never verifies under the production keys, nor through the SDK's receiver by default…
  const production = (await (await fetch(`${base}/.well-known/jwks.json`)).json()) as JSONWebKeySet;
  await expect(
    verifyPush({ token: push.headers['sluice-signature'], keys: createLocalJWKSet(production), url, body, nowMs: Date.now() }),
  ).rejects.toMatchObject({
    check: 'unknown_key',
  });
  const refusedByDefault = await createReceiver({ sluiceUrl: base })
    .verify(request())
    .catch((e: unknown) => e);
  expect(refusedByDefault).toBeInstanceOf(SignatureError);
  expect((refusedByDefault as SignatureError).check).toBe('forwarded');
  // …nor under its endpoint's own Standard Webhooks secret.
  const webhook = {
    id: push.headers['webhook-id']!,
    timestamp: push.headers['webhook-timestamp']!,
    signature: push.headers['webhook-signature']!,
  };
  expect(await verifyWebhook(await endpointWebhookKey(webhookSecretBytes(MASTER), url), webhook, push.body_text, Date.now())).toBe(false);

  // A development handler trusts it: the receiver with acceptForwarded, and the forwarding secret.
  const verified = await createReceiver({ sluiceUrl: base, acceptForwarded: true }).verify(request());
  expect([verified.taskId, verified.lease.id]).toEqual([enqueued.body.id, task!.lease.id]);
  const trust = await apiCall(base, pullKey, 'GET', `/v1/webhooks/forwarding?url=${encodeURIComponent(url)}`);
  expect(trust.body).toMatchObject({ url, issuer: 'sluice-forward', jwks_url: `${base}/.well-known/forward-jwks.json` });
  expect(await verifyWebhook(webhookSecretBytes(String(trust.body.webhook_secret)), webhook, push.body_text, Date.now())).toBe(true);
  expect((await apiCall(base, task!.lease.token, 'POST', `/v1/leases/${task!.lease.id}/complete`, {})).status).toBe(200);

  // A key that lists an origin may forward there too; a key that does not may not.
  expect((await apiCall(base, f.secrets.apiKey, 'POST', '/v1/tasks', { queue: 'dev', body: { n: 2 } })).status).toBe(201);
  const remote = await apiCall(base, forwarder.key, 'POST', '/v1/queues/dev/lease', {
    push_to: 'https://dev.example.com/hook',
    wait_ms: 5_000,
  });
  expect(remote.status).toBe(200);
  const [far] = remote.body.tasks as Pulled[];
  expect(far!.push.url).toBe('https://dev.example.com/hook');
  expect((await apiCall(base, far!.lease.token, 'POST', `/v1/leases/${far!.lease.id}/complete`, {})).status).toBe(200);
}

describe('forwarded pushes (push_to)', () => {
  it('on the Worker', async () => {
    await exercise(f.worker.url, f.t.db);
  }, 60_000);

  describe('on the Node server', () => {
    const side = useNodeBeside(f, vars);
    it('hold the same', async () => {
      await exercise(side.node.url, side.t.db);
    }, 60_000);
  });
});
