/**
 * The pieces every operation of the OpenAPI document is made of (document.ts): an operation with
 * its scope, queue limits and problem answers, an open one, the headers several read.
 */
import type { z } from 'zod';
import { json } from './schemas.ts';

export type Op = {
  id: string;
  summary: string;
  scope: string;
  body?: object;
  /** The body may be left out (lease calls: every field has a default). */
  bodyOptional?: boolean;
  query?: z.ZodObject;
  /** Request headers the operation reads. */
  headers?: object[];
  /** The success answer's schema; null = no body. */
  ok?: object | null;
  okStatus?: string;
  /** More success answers: status → schema (or null for no body). */
  also?: Record<string, object | null>;
  /**
   * What a key limited to queues (SLUICE_API_KEYS `queues`) meets here: when it is refused
   * (`forbidden`, a 403 `queue_not_allowed` of its own), and what it sees (`sees`).
   */
  queueLimit?: { forbidden?: string; sees?: string };
};

/** A group is no queue's: a key limited to queues may not read or change groups. */
export const GROUP_LIMIT = { forbidden: "always: a group's URLs receive tasks of any queue" };

export const PROBLEM = { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } };

export function operation({
  id,
  summary,
  scope,
  body,
  bodyOptional = false,
  query,
  headers = [],
  ok,
  okStatus = '200',
  also = {},
  queueLimit = {},
}: Op) {
  const answer = (schema: object | null) => ({ description: 'OK', ...(schema ? { content: { 'application/json': { schema } } } : {}) });
  const parameters = [
    ...Object.entries(query?.shape ?? {}).map(([name, s]) => ({ name, in: 'query', required: false, schema: json(s as z.ZodType) })),
    ...headers,
  ];
  return {
    operationId: id,
    summary,
    security: [{ [scope === 'lease token' ? 'leaseToken' : 'apiKey']: [] }],
    description: [
      `Requires: ${scope}.`,
      ...(queueLimit.forbidden ? [`A key limited to queues gets 403 queue_not_allowed ${queueLimit.forbidden}.`] : []),
      ...(queueLimit.sees ? [`A key limited to queues ${queueLimit.sees}.`] : []),
    ].join(' '),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(body ? { requestBody: { required: !bodyOptional, content: { 'application/json': { schema: body } } } } : {}),
    responses: {
      [okStatus]: answer(ok === undefined ? { type: 'object' } : ok),
      ...Object.fromEntries(Object.entries(also).map(([status, schema]) => [status, answer(schema)])),
      ...(queueLimit.forbidden
        ? {
            '403': {
              description: `The key lacks the scope (forbidden), or is limited to queues: queue_not_allowed ${queueLimit.forbidden}`,
              content: PROBLEM,
            },
          }
        : {}),
      '4XX': {
        description: 'A problem with the request',
        content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
      },
      '503': {
        description: 'The database does not answer (an outage, or no connection free in time): repeat after Retry-After',
        headers: { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } },
        content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
      },
    },
  };
}

/** An endpoint anyone may call. */
export const open = (id: string, summary: string, type: string, schema: object, extra: Record<string, object> = {}) => ({
  get: {
    operationId: id,
    summary,
    security: [],
    responses: { '200': { description: 'OK', content: { [type]: { schema } } }, ...extra },
  },
});

export const preferHeader = {
  name: 'Prefer',
  in: 'header',
  required: false,
  description: '`return=minimal`: answer each task with its id, queue and status only (RFC 7240; `Preference-Applied` confirms it).',
  schema: { type: 'string' },
};
/** W3C Trace Context on a request: an enqueue's tasks run in it; a call in a trace is a span of it (Node). */
export const traceHeaders = [
  {
    name: 'traceparent',
    in: 'header',
    required: false,
    description:
      'W3C Trace Context. On an enqueue: the trace each task without one of its own runs in (a malformed one is ignored). A request in a trace is a span of it where the server exports spans (the Node server, over OTLP).',
    schema: { type: 'string' },
  },
  {
    name: 'tracestate',
    in: 'header',
    required: false,
    description: 'W3C Trace Context vendor data, with `traceparent`.',
    schema: { type: 'string' },
  },
];
export const idParam = (name: string) => ({ name, in: 'path', required: true, schema: { type: 'string' } });

/** A lease call: authorized by the push's lease token; every body field may be left out. */
export const leaseCall = (id: string, summary: string, body: object, ok: object) => ({
  parameters: [idParam('lease_id')],
  post: operation({ id, summary, scope: 'lease token', body, bodyOptional: true, headers: traceHeaders, ok }),
});
