/**
 * Forwarded pushes (src/security/forwarding.ts): their keys, their secrets and their targets are
 * never a production push's.
 */
import { createLocalJWKSet, decodeProtectedHeader } from 'jose';
import { describe, expect, it } from 'vitest';
import type { LeasedTask } from '../../src/core/types.ts';
import { FORWARD_ISSUER, SignatureError, verifyPush } from '../../src/protocol/signature.ts';
import { verifyWebhook, webhookSecretBytes } from '../../src/protocol/webhook.ts';
import { pushTask } from '../../src/push/push.ts';
import { signedRequest } from '../../src/push/sign.ts';
import { createReceiver } from '../../src/sdk/receiver.ts';
import { forwardTargetProblem } from '../../src/security/forwarding.ts';
import { generateSigningJwk, loadKeyring } from '../../src/security/keyring.ts';
import { endpointWebhookKey, forwardWebhookKey } from '../../src/security/webhook-secrets.ts';

describe('forwardTargetProblem', () => {
  it('takes loopback URLs, on any port, with a query', () => {
    for (const url of [
      'http://127.0.0.1:3000/task',
      'http://127.9.8.7/task?x=1',
      'http://0x7f.1:3000/task',
      'http://localhost:3000/api/task',
      'https://LOCALHOST/task',
      'http://[::1]:3000/task',
    ]) {
      expect(forwardTargetProblem(url, []), url).toBeNull();
    }
  });

  it('refuses every other target, naming the rule', () => {
    for (const url of [
      'https://victim.example/hook',
      'http://10.0.0.5/internal/admin',
      'http://169.254.169.254/latest/meta-data/',
      'http://[::ffff:127.0.0.1]/task',
      'http://localhost.example.com/task',
      'http://dev.localhost/task',
    ]) {
      expect(forwardTargetProblem(url, []), url).toMatch(
        /^must be a loopback URL \(127\.0\.0\.0\/8, \[::1\] or localhost\), or an origin this API key lists in "forward_to"/,
      );
    }
    expect(forwardTargetProblem('http://localhost:3000/task#frag', [])).toMatch(/^must not have a fragment/);
    expect(forwardTargetProblem('http://u:p@localhost:3000/task', [])).toBe('must not carry credentials');
    expect(forwardTargetProblem('file:///etc/passwd', [])).toBe('must be an http or https URL');
    expect(forwardTargetProblem('not a url', [])).toBe('must be an http or https URL');
  });

  it('takes an origin the key lists, and only that origin', () => {
    const allowed = ['https://dev.example.com'];
    expect(forwardTargetProblem('https://dev.example.com/hook?x=1', allowed)).toBeNull();
    expect(forwardTargetProblem('https://dev.example.com:8443/hook', allowed)).not.toBeNull();
    expect(forwardTargetProblem('http://dev.example.com/hook', allowed)).not.toBeNull();
    expect(forwardTargetProblem('https://evil.dev.example.com/hook', allowed)).not.toBeNull();
  });
});

const task: LeasedTask = {
  id: '42',
  queue: 'dev',
  concurrencyKey: null,
  url: null,
  method: 'POST',
  headers: {},
  body: '{"n":1}',
  contentType: 'application/json',
  attempts: 1,
  maxAttempts: 5,
  resumes: 0,
  leaseMs: 60_000,
  timeoutMs: 30_000,
  lease: { id: '7f8a1d7e-4c4b-4c1a-9d55-1b5f3e1f0c11', leasedAt: new Date(1_800_000_000_000), expiresAt: new Date(1_800_000_060_000) },
} as unknown as LeasedTask;

describe('a forwarded push', async () => {
  const jwk = await generateSigningJwk('ES256', 'prod-1');
  const keyring = await loadKeyring({ keys: [jwk] });
  const master = webhookSecretBytes(`whsec_${btoa('m'.repeat(32))}`);
  const url = 'http://localhost:3000/task';
  const nowMs = 1_800_000_001_000;
  const deps = { keyring, issuer: 'sluice', webhookSecret: master, webhookSecretNext: null, maxLeaseMs: 3_600_000 };
  const forwarded = await signedRequest(task, url, { ...deps, forwarded: true }, nowMs);
  const production = await signedRequest(task, url, deps, nowMs);
  const body = new TextEncoder().encode(task.body!);
  const sig = (r: typeof forwarded) => r.headers['sluice-signature']!;

  it('is signed by a key derived from the signing key, published apart, under its own issuer', async () => {
    expect(keyring.forward.jwks.keys.map((k) => k.kid)).toEqual(['prod-1.forward']);
    expect(keyring.jwks.keys.map((k) => k.kid)).toEqual(['prod-1']);
    expect(keyring.forward.jwks.keys[0]).not.toHaveProperty('d');
    // Every instance derives the same key from the same signing key.
    expect((await loadKeyring({ keys: [{ ...jwk }, await generateSigningJwk()] })).forward.jwks.keys[0]).toEqual(
      keyring.forward.jwks.keys[0],
    );
    expect(decodeProtectedHeader(sig(forwarded)).kid).toBe('prod-1.forward');
    const claims = await verifyPush({
      token: sig(forwarded),
      keys: createLocalJWKSet(keyring.forward.jwks),
      url,
      body,
      nowMs,
      issuer: FORWARD_ISSUER,
    });
    expect([claims.sub, claims.jti]).toEqual(['42', task.lease.id]);
  });

  it('never verifies under the production keys, whatever the verifier checks', async () => {
    const production_keys = createLocalJWKSet(keyring.jwks);
    await expect(verifyPush({ token: sig(forwarded), keys: production_keys, url, body, nowMs })).rejects.toMatchObject({
      check: 'unknown_key',
    });
    // The production push does, as before.
    await expect(verifyPush({ token: sig(production), keys: production_keys, url, body, nowMs, issuer: 'sluice' })).resolves.toBeTruthy();
  });

  it('is refused by the SDK’s receiver unless it accepts forwarded pushes', async () => {
    const request = (r: typeof forwarded) => new Request(url, { method: 'POST', headers: r.headers, body });
    const receiver = createReceiver({ keys: keyring.jwks, forwardKeys: keyring.forward.jwks, now: () => nowMs });
    const refused = await receiver.verify(request(forwarded)).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(SignatureError);
    expect(refused).toMatchObject({ check: 'forwarded' });
    // Even told the production issuer, and even with the forwarding keys among its keys.
    const mixed = createReceiver({
      keys: { keys: [...keyring.jwks.keys, ...keyring.forward.jwks.keys] },
      issuer: 'sluice',
      now: () => nowMs,
    });
    await expect(mixed.verify(request(forwarded))).rejects.toMatchObject({ check: 'forwarded' });

    const development = createReceiver({
      keys: keyring.jwks,
      forwardKeys: keyring.forward.jwks,
      acceptForwarded: true,
      issuer: 'sluice',
      rejectReplays: false,
      now: () => nowMs,
    });
    expect((await development.verify(request(forwarded))).taskId).toBe('42');
    expect((await development.verify(request(production))).taskId).toBe('42');
    // A token that claims the production issuer is checked against the production keys only.
    const forgedIssuer = createReceiver({
      keys: keyring.forward.jwks,
      forwardKeys: keyring.forward.jwks,
      acceptForwarded: true,
      issuer: 'sluice',
      now: () => nowMs,
    });
    await expect(forgedIssuer.verify(request(production))).rejects.toMatchObject({ check: 'unknown_key' });
  });

  it('carries a Standard Webhooks signature under no endpoint’s secret', async () => {
    const headers = (r: typeof forwarded) => ({
      id: r.headers['webhook-id']!,
      timestamp: r.headers['webhook-timestamp']!,
      signature: r.headers['webhook-signature']!,
    });
    const endpointSecret = await endpointWebhookKey(master, url);
    expect(await verifyWebhook(endpointSecret, headers(forwarded), task.body!, nowMs)).toBe(false);
    expect(await verifyWebhook(endpointSecret, headers(production), task.body!, nowMs)).toBe(true);
    expect(await verifyWebhook(await forwardWebhookKey(master, url), headers(forwarded), task.body!, nowMs)).toBe(true);
    // The forwarding secret of one endpoint is no other endpoint's secret either.
    expect(Buffer.from(await forwardWebhookKey(master, 'https://victim.example/hook')).equals(Buffer.from(endpointSecret))).toBe(false);
  });

  it('is what the dispatcher never sends: its pushes are production pushes', async () => {
    let sent: Headers | null = null;
    await pushTask({ ...task, url: 'https://endpoint.example/task' } as LeasedTask, {
      ...deps,
      allowPrivateTargets: false,
      now: () => nowMs,
      transport: async (request) => {
        sent = new Headers(request.headers);
        return { status: 200, headers: {}, body: '' };
      },
    });
    expect(decodeProtectedHeader(sent!.get('sluice-signature')!).kid).toBe('prod-1');
  });
});
