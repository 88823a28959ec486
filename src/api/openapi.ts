/**
 * The OpenAPI 3.1 document, generated from the zod schemas the API validates with (no second
 * hand-written copy), served at /openapi.json and rendered at /docs.
 */
import { z } from 'zod';
import { queueLimitsSchema } from '../config.ts';
import { batchSchema, enqueueSchema, listQuerySchema } from './schemas.ts';

const json = (schema: z.ZodType) => z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any', target: 'draft-2020-12' });

const problem = {
  type: 'object',
  description: 'RFC 9457 problem document; `issues` names each wrong field.',
  properties: {
    type: { type: 'string' },
    title: { type: 'string' },
    status: { type: 'integer' },
    code: { type: 'string' },
    detail: { type: 'string' },
    issues: { type: 'array', items: { type: 'object', properties: { path: { type: 'string' }, message: { type: 'string' } } } },
  },
  required: ['type', 'title', 'status', 'code', 'detail'],
};

const task = {
  type: 'object',
  description: 'A task as the API returns it.',
  properties: {
    id: { type: 'string' },
    queue: { type: 'string' },
    status: { type: 'string', enum: ['pending', 'leased', 'succeeded', 'dead', 'cancelled', 'expired'] },
    url: { type: 'string' },
    method: { type: 'string' },
    concurrency_key: { type: ['string', 'null'] },
    priority: { type: 'integer' },
    run_at: { type: 'string', format: 'date-time' },
    expires_at: { type: ['string', 'null'], format: 'date-time' },
    attempts: { type: 'integer' },
    max_attempts: { type: 'integer' },
    lease: { type: ['object', 'null'] },
    result: { type: ['string', 'null'] },
    last_error: { type: ['string', 'null'] },
    last_status: { type: ['integer', 'null'] },
    deduplicated: { type: 'boolean', description: 'Enqueue only: an unfinished task with this dedup_key was returned.' },
  },
};

type Op = { summary: string; scope: string; body?: object; query?: z.ZodObject; ok?: object; okStatus?: string };

function operation({ summary, scope, body, query, ok, okStatus = '200' }: Op) {
  return {
    summary,
    security: [{ [scope === 'lease token' ? 'leaseToken' : 'apiKey']: [] }],
    description: `Requires: ${scope}.`,
    ...(query
      ? {
          parameters: Object.entries(query.shape).map(([name, s]) => ({
            name,
            in: 'query',
            required: false,
            schema: json(s as z.ZodType),
          })),
        }
      : {}),
    ...(body ? { requestBody: { required: true, content: { 'application/json': { schema: body } } } } : {}),
    responses: {
      [okStatus]: { description: 'OK', content: { 'application/json': { schema: ok ?? { type: 'object' } } } },
      '4XX': {
        description: 'A problem with the request',
        content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
      },
    },
  };
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const idParam = (name: string) => ({ name, in: 'path', required: true, schema: { type: 'string' } });

export function openApiDocument(): object {
  const leaseCall = (summary: string, body: object) => ({
    parameters: [idParam('lease_id')],
    post: operation({ summary, scope: 'lease token', body }),
  });
  return {
    openapi: '3.1.0',
    info: {
      title: 'Sluice',
      version: '1',
      description: 'Serverless task queue with signed HTTP push delivery and hard concurrency limits.',
    },
    components: {
      schemas: { EnqueueRequest: json(enqueueSchema), Task: task, Problem: problem, QueueOverride: json(queueLimitsSchema) },
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'An API key (sk_sluice_…).' },
        leaseToken: { type: 'http', scheme: 'bearer', description: 'The Sluice-Lease-Token of the push.' },
      },
    },
    paths: {
      '/v1/tasks': {
        post: operation({ summary: 'Enqueue a task', scope: 'tasks:write', body: ref('EnqueueRequest'), ok: ref('Task'), okStatus: '201' }),
        get: operation({ summary: 'List tasks, newest first', scope: 'tasks:read', query: listQuerySchema }),
      },
      '/v1/tasks/batch': {
        post: operation({
          summary: 'Enqueue up to 1,000 tasks, all or nothing',
          scope: 'tasks:write',
          body: { ...json(batchSchema), properties: { tasks: { type: 'array', maxItems: 1000, items: ref('EnqueueRequest') } } },
          okStatus: '201',
        }),
      },
      '/v1/tasks/{id}': {
        parameters: [idParam('id')],
        get: operation({ summary: 'A task, with its attempt history', scope: 'tasks:read', ok: ref('Task') }),
      },
      '/v1/tasks/{id}/cancel': {
        parameters: [idParam('id')],
        post: operation({ summary: 'Cancel a task', scope: 'tasks:write', ok: ref('Task') }),
      },
      '/v1/tasks/{id}/retry': {
        parameters: [idParam('id')],
        post: operation({ summary: 'Redrive a dead task', scope: 'tasks:write', ok: ref('Task') }),
      },
      '/v1/leases/{lease_id}/heartbeat': leaseCall('Extend a kept lease', {
        type: 'object',
        properties: { extend_ms: { type: 'integer' } },
      }),
      '/v1/leases/{lease_id}/complete': leaseCall('Finish the task', { type: 'object', properties: { result: {} } }),
      '/v1/leases/{lease_id}/fail': leaseCall('Fail the attempt', {
        type: 'object',
        properties: { error: { type: 'string' }, retry: { type: 'boolean' }, retry_after_ms: { type: 'integer' } },
      }),
      '/v1/leases/{lease_id}/release': leaseCall('Give the task back without using an attempt', {
        type: 'object',
        properties: { delay_ms: { type: 'integer' } },
      }),
      '/v1/queues': { get: operation({ summary: 'Queues with their effective settings', scope: 'tasks:read' }) },
      '/v1/queues/{queue}': {
        parameters: [idParam('queue')],
        get: operation({ summary: 'A queue: settings with their sources, counts', scope: 'tasks:read' }),
        put: operation({ summary: 'Override settings at run time (null removes one)', scope: 'admin', body: ref('QueueOverride') }),
        delete: operation({ summary: 'Drop the run-time overrides', scope: 'admin' }),
      },
      '/v1/queues/{queue}/concurrency': {
        parameters: [idParam('queue')],
        get: operation({ summary: 'Limit, active and slot holders per level and key', scope: 'tasks:read' }),
      },
      '/v1/queues/{queue}/keys/{key}': {
        parameters: [idParam('queue'), idParam('key')],
        put: operation({
          summary: 'Set the limit of one key',
          scope: 'admin',
          body: { type: 'object', properties: { limit: { type: 'integer', minimum: 1 } } },
        }),
        delete: operation({ summary: 'Drop the limit of one key', scope: 'admin' }),
      },
      '/v1/webhooks/secret': {
        get: operation({
          summary: "The Standard Webhooks secret of a URL's endpoint (origin and path)",
          scope: 'admin',
          query: z.object({ url: z.string() }),
          ok: { type: 'object', properties: { endpoint: { type: 'string' }, secret: { type: 'string' } } },
        }),
      },
      '/.well-known/jwks.json': {
        get: { summary: 'Public keys that sign pushes (current and next)', responses: { '200': { description: 'JWKS' } } },
      },
      '/healthz': {
        get: { summary: 'Health', responses: { '200': { description: 'OK' }, '503': { description: 'The database does not answer' } } },
      },
    },
  };
}

export const DOCS_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sluice API</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
h2{border-bottom:1px solid #ddd;margin-top:2rem}.op{margin:.6rem 0;padding:.4rem .6rem;border-left:4px solid #4a7}
.m{font-weight:700;display:inline-block;min-width:4.5rem}code,pre{background:#f5f5f5;padding:.1rem .3rem}pre{padding:.6rem;overflow:auto}
.scope{color:#666;font-size:.9em}</style></head>
<body><h1>Sluice API</h1><p>Generated from <a href="/openapi.json">/openapi.json</a>.</p><div id="ops">Loading…</div>
<script>
fetch('/openapi.json').then(r=>r.json()).then(doc=>{
  const root=document.getElementById('ops');root.textContent='';
  const esc=s=>String(s).replace(/[&<>]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;'}[c]));
  for(const [path,item] of Object.entries(doc.paths)){
    for(const [m,op] of Object.entries(item)){ if(m==='parameters')continue;
      const d=document.createElement('div');d.className='op';
      d.innerHTML='<span class="m">'+m.toUpperCase()+'</span> <code>'+esc(path)+'</code> — '+esc(op.summary||'')+' <span class="scope">'+esc(op.description||'')+'</span>';
      root.appendChild(d);}}
  const h=document.createElement('h2');h.textContent='Schemas';root.appendChild(h);
  for(const [name,s] of Object.entries(doc.components.schemas)){
    const t=document.createElement('h3');t.textContent=name;root.appendChild(t);
    const p=document.createElement('pre');p.textContent=JSON.stringify(s,null,2);root.appendChild(p);}
});
</script></body></html>`;
