/**
 * /v1/endpoints: the origins Sluice pushes to and their health; a pause or resume by hand
 * (admin). The work is in endpoint-ops.ts, shared with the dashboard. An origin is no one
 * queue's, so a key limited to queues may not use these.
 */
import { Hono } from 'hono';
import type { Answer, endpoint, endpointList } from '../answers.ts';
import { requireScope } from '../auth.ts';
import type { AppEnv } from '../context.ts';
import { listEndpoints, pauseEndpoint, resumeEndpoint } from '../endpoint-ops.ts';
import { requireEveryQueue } from '../queue-access.ts';

export const endpoints = new Hono<AppEnv>();

endpoints.get('/', requireScope('tasks:read'), async (c) => {
  requireEveryQueue(c.var.queueScope, 'endpoint health');
  return c.json({ endpoints: await listEndpoints(c.var) } satisfies Answer<typeof endpointList>);
});

endpoints.post('/:origin/pause', requireScope('admin'), async (c) => {
  requireEveryQueue(c.var.queueScope, 'pausing an endpoint');
  return c.json((await pauseEndpoint(c.var, c.req.param('origin'))) satisfies Answer<typeof endpoint>);
});

endpoints.post('/:origin/resume', requireScope('admin'), async (c) => {
  requireEveryQueue(c.var.queueScope, 'resuming an endpoint');
  return c.json((await resumeEndpoint(c.var, c.req.param('origin'))) satisfies Answer<typeof endpoint>);
});
