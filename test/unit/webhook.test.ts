import { describe, expect, it } from 'vitest';
import { signWebhook, verifyWebhook, webhookSecretBytes } from '../../src/protocol/webhook.ts';

// The example from the Standard Webhooks specification.
const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const ID = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
const TS = 1614265330;
const BODY = '{"test": 2432232314}';

describe('Standard Webhooks signatures', () => {
  it('match the specification example', async () => {
    expect(await signWebhook(webhookSecretBytes(SECRET), ID, TS, BODY)).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('verify within the tolerance, among several signatures, and not outside it', async () => {
    const secret = webhookSecretBytes(SECRET);
    const signature = `v1,bm90IGl0 ${await signWebhook(secret, ID, TS, BODY)}`;
    expect(await verifyWebhook(secret, { id: ID, timestamp: String(TS), signature }, BODY, TS * 1000 + 60_000)).toBe(true);
    expect(await verifyWebhook(secret, { id: ID, timestamp: String(TS), signature }, BODY, TS * 1000 + 400_000)).toBe(false);
    expect(await verifyWebhook(secret, { id: ID, timestamp: String(TS), signature }, `${BODY} `, TS * 1000)).toBe(false);
  });

  it('refuse malformed or short secrets', () => {
    expect(() => webhookSecretBytes('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')).toThrow(/whsec_/);
    expect(() => webhookSecretBytes('whsec_c2hvcnQ=')).toThrow(/24 to 64 bytes/);
  });
});
