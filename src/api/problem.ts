/** The one mapping from errors to responses: RFC 9457 problem documents. */
import type { Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { SluiceError } from '../core/errors.ts';
import { isSchemaMismatch, isTransientDbError } from '../db/faults.ts';
import type { Answer, problem } from './answers.ts';

/** How long a client is asked to wait after a 503 (the database does not answer). */
export const UNAVAILABLE_RETRY_AFTER_S = 1;

export type Problem = Answer<typeof problem>;

export function problemResponse(c: Context, p: Problem): Response {
  return c.body(JSON.stringify(p), p.status as 400, { 'content-type': 'application/problem+json' });
}

export function problemOf(error: unknown): Problem {
  if (error instanceof SluiceError) {
    return {
      type: `https://sluice.dev/problems/${error.code}`,
      title: titleOf(error.status),
      status: error.status,
      code: error.code,
      detail: error.message,
      ...(error.issues.length > 0 ? { issues: error.issues } : {}),
    };
  }
  if (error instanceof HTTPException) {
    return {
      type: 'about:blank',
      title: titleOf(error.status),
      status: error.status,
      code: codeOf(error.status),
      detail: error.message || titleOf(error.status),
    };
  }
  if (isSchemaMismatch(error)) {
    return {
      type: 'https://sluice.dev/problems/schema_not_migrated',
      title: 'Service Unavailable',
      status: 503,
      code: 'schema_not_migrated',
      detail: "the database is not migrated for this version of Sluice; the server's log says how to fix it",
    };
  }
  if (isTransientDbError(error)) {
    // The request can be repeated once the database answers. (Every write is one statement or
    // one transaction; an enqueue whose answer was lost may still have been written, which a
    // dedup_key makes safe to repeat.)
    return {
      type: 'https://sluice.dev/problems/database_unavailable',
      title: 'Service Unavailable',
      status: 503,
      code: 'database_unavailable',
      detail: 'the database does not answer now; try again shortly',
    };
  }
  return {
    type: 'about:blank',
    title: 'Internal Server Error',
    status: 500,
    code: 'internal',
    detail: 'an internal error occurred; it has been logged',
  };
}

function titleOf(status: number): string {
  return TITLES[status] ?? (status >= 500 ? 'Server Error' : 'Client Error');
}

function codeOf(status: number): string {
  return (TITLES[status] ?? 'error').toLowerCase().replace(/ /g, '_');
}

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};
