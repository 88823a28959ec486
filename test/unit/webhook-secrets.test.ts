import { describe, expect, it } from 'vitest';
import { webhookSecretBytes } from '../../src/protocol/webhook.ts';
import { endpointWebhookSecret, webhookEndpoint } from '../../src/security/webhook-secrets.ts';

const master = webhookSecretBytes('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');

describe('per-endpoint webhook secrets', () => {
  it('an endpoint is its origin and path; the query and fragment are not part of it', () => {
    expect(webhookEndpoint('https://Example.com:443/hooks/a?order=1#x')).toBe('https://example.com/hooks/a');
  });
  it('are stable per endpoint, differ between endpoints and masters, and are valid whsec_ secrets', async () => {
    const a = await endpointWebhookSecret(master, 'https://example.com/hooks/a?order=1');
    expect(a).toBe(await endpointWebhookSecret(master, 'https://example.com/hooks/a?order=2'));
    expect(a).not.toBe(await endpointWebhookSecret(master, 'https://example.com/hooks/b'));
    expect(a).not.toBe(await endpointWebhookSecret(master, 'https://example.org/hooks/a'));
    const other = webhookSecretBytes('whsec_YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo=');
    expect(a).not.toBe(await endpointWebhookSecret(other, 'https://example.com/hooks/a'));
    expect(webhookSecretBytes(a)).toHaveLength(32);
  });
});
