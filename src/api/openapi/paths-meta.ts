/**
 * The OpenAPI document's paths of webhooks, endpoints, metrics and Sluice itself.
 */
import { z } from 'zod';
import { FORWARD_JWKS_PATH } from '../../protocol/signature.ts';
import * as answers from '../answers.ts';
import { idParam, open, operation } from './operation.ts';
import { answer } from './schemas.ts';

export function metaPaths(): Record<string, object> {
  return {
    '/v1/webhooks/secret': {
      get: operation({
        id: 'getWebhookSecret',
        summary: "The Standard Webhooks secret of a URL's endpoint (origin and path)",
        scope: 'admin',
        query: z.object({ url: z.string() }),
        ok: answer(answers.webhookSecret),
        queueLimit: { forbidden: 'always: an endpoint belongs to no one queue' },
      }),
    },
    '/v1/webhooks/forwarding': {
      get: operation({
        id: 'getForwarding',
        summary: 'What verifies pushes a pull forwards to a URL (push_to): issuer, keys, Standard Webhooks secret',
        scope: 'tasks:pull',
        query: z.object({ url: z.string() }),
        ok: answer(answers.forwarding),
      }),
    },
    '/v1/endpoints': {
      get: operation({
        id: 'listEndpoints',
        summary: 'Endpoint origins and their health: failures in a row, the last five minutes, a pause, a hold',
        scope: 'tasks:read',
        ok: answer(answers.endpointList),
        queueLimit: { forbidden: 'always: an origin belongs to no one queue' },
      }),
    },
    '/v1/endpoints/{origin}/pause': {
      parameters: [{ ...idParam('origin'), description: 'The origin, URL-encoded: https%3A%2F%2Fexample.com' }],
      post: operation({
        id: 'pauseEndpoint',
        summary: 'Pause an origin by hand: its tasks wait, using no attempt, and no probe goes until a resume',
        scope: 'admin',
        ok: answer(answers.endpoint),
        queueLimit: { forbidden: 'always: an origin belongs to no one queue' },
      }),
    },
    '/v1/endpoints/{origin}/resume': {
      parameters: [{ ...idParam('origin'), description: 'The origin, URL-encoded: https%3A%2F%2Fexample.com' }],
      post: operation({
        id: 'resumeEndpoint',
        summary: 'Resume an origin (paused by hand or by failures, or held by a Retry-After): its waiting tasks are due now',
        scope: 'admin',
        ok: answer(answers.endpoint),
        queueLimit: { forbidden: 'always: an origin belongs to no one queue' },
      }),
    },
    '/metrics': {
      get: (() => {
        const op = operation({
          id: 'getMetrics',
          summary: 'Prometheus metrics (text format 0.0.4)',
          scope: 'metrics:read or admin',
          queueLimit: { forbidden: 'always: a scrape spans every queue' },
        });
        const text = { description: 'OK', content: { 'text/plain': { schema: { type: 'string' } } } };
        return { ...op, responses: { ...op.responses, '200': text } };
      })(),
    },
    '/.well-known/jwks.json': open('getJwks', 'Public keys that sign pushes (current and next)', 'application/json', {
      type: 'object',
      properties: { keys: { type: 'array', items: { type: 'object' } } },
      required: ['keys'],
    }),
    [FORWARD_JWKS_PATH]: open(
      'getForwardJwks',
      'Public keys that sign forwarded pushes (push_to): never production pushes',
      'application/json',
      {
        type: 'object',
        properties: { keys: { type: 'array', items: { type: 'object' } } },
        required: ['keys'],
      },
    ),
    '/healthz': open('getHealth', 'Health', 'application/json', answer(answers.health), {
      '503': {
        description: 'The database does not answer, or its schema is missing or behind',
        content: { 'application/json': { schema: answer(answers.health) } },
      },
    }),
    '/openapi.json': open('getOpenApi', 'This document', 'application/json', {
      type: 'object',
      properties: { openapi: { type: 'string' }, info: { type: 'object' }, paths: { type: 'object' } },
      required: ['openapi', 'info', 'paths'],
    }),
    '/docs': open('getDocs', 'A page that renders this document', 'text/html', { type: 'string' }),
  };
}
