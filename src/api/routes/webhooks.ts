/**
 * /v1/webhooks: the Standard Webhooks secret to configure at an endpoint (admin), and what a
 * handler behind `sluice listen` trusts to verify forwarded pushes (tasks:pull).
 */
import { Hono } from 'hono';
import { ConflictError, ValidationError } from '../../core/errors.ts';
import { FORWARD_ISSUER, FORWARD_JWKS_PATH } from '../../protocol/signature.ts';
import { forwardTargetProblem } from '../../security/forwarding.ts';
import { endpointWebhookSecret, forwardWebhookSecret, webhookEndpoint } from '../../security/webhook-secrets.ts';
import type { Answer, forwarding, webhookSecret } from '../answers.ts';
import { requireScope } from '../auth.ts';
import type { AppEnv } from '../context.ts';
import { requireEveryQueue } from '../queue-access.ts';

export const webhooks = new Hono<AppEnv>();

webhooks.get('/secret', requireScope('admin'), async (c) => {
  // An endpoint is no queue's: its secret would sign pushes of any queue's tasks to it.
  requireEveryQueue(c.var.queueScope, "an endpoint's webhook secret");
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

/**
 * What verifies the pushes a pull forwards to `url` (`push_to`, `sluice listen --forward-to`):
 * their issuer, their keys and their Standard Webhooks secret, none of which a production push
 * has (security/forwarding.ts). The same rule as `push_to` applies to `url`.
 */
webhooks.get('/forwarding', requireScope('tasks:pull'), async (c) => {
  const url = c.req.query('url') ?? '';
  const problem = forwardTargetProblem(url, c.var.forwardTo);
  if (problem) throw new ValidationError([{ path: 'url', message: problem }]);
  const { webhookSecret: master, webhookSecretNext: next } = c.var.config;
  return c.json({
    url,
    issuer: FORWARD_ISSUER,
    jwks_url: new URL(FORWARD_JWKS_PATH, c.req.url).href,
    webhook_secret: master ? await forwardWebhookSecret(master, url) : null,
    ...(master && next ? { next_webhook_secret: await forwardWebhookSecret(next, url) } : {}),
  } satisfies Answer<typeof forwarding>);
});
