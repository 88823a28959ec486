/** /v1/webhooks: the Standard Webhooks secret to configure at an endpoint (admin). */
import { Hono } from 'hono';
import { ConflictError, ValidationError } from '../../core/errors.ts';
import { endpointWebhookSecret, webhookEndpoint } from '../../security/webhook-secrets.ts';
import type { Answer, webhookSecret } from '../answers.ts';
import { requireScope } from '../auth.ts';
import type { AppEnv } from '../context.ts';

export const webhooks = new Hono<AppEnv>();

webhooks.get('/secret', requireScope('admin'), async (c) => {
  const master = c.var.config.webhookSecret;
  if (!master)
    throw new ConflictError(409, 'webhooks_off', 'SLUICE_WEBHOOK_SECRET is not set, so pushes carry no Standard Webhooks signature');
  const url = c.req.query('url') ?? '';
  if (!/^https?:\/\//i.test(url) || !URL.canParse(url)) {
    throw new ValidationError([{ path: 'url', message: 'must be the absolute http(s) URL of the endpoint' }]);
  }
  const next = c.var.config.webhookSecretNext;
  return c.json({
    endpoint: webhookEndpoint(url),
    secret: await endpointWebhookSecret(master, url),
    ...(next ? { next_secret: await endpointWebhookSecret(next, url) } : {}),
  } satisfies Answer<typeof webhookSecret>);
});
