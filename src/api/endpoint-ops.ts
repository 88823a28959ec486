/**
 * Endpoint origins and their health (docs/DESIGN.md §5, "Endpoints"): listed, paused and resumed
 * by hand; shared by the API's routes and the dashboard.
 */
import { NotFoundError, ValidationError } from '../core/errors.ts';
import { LIMITS } from '../core/types.ts';
import { type EndpointHealthRow, endpointGet, endpointPause, endpointResume, endpointsList } from '../db/endpoints.ts';
import type { Answer, endpoint } from './answers.ts';
import type { OpsContext } from './queue-ops.ts';

export type EndpointView = Answer<typeof endpoint>;

/** An origin as a path or form gives it (`https://example.com`, a port if not the default): its canonical form, else a 400 naming `origin`. */
export function originParam(text: string): string {
  const problem = [
    { path: 'origin', message: 'must be an http(s) origin: scheme, host and port if not the default, such as https://example.com' },
  ];
  if (text.length > LIMITS.urlChars || !/^https?:\/\//i.test(text) || !URL.canParse(text)) throw new ValidationError(problem);
  const url = new URL(text);
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '' || text.endsWith('?'))
    throw new ValidationError(problem);
  return url.origin;
}

export function endpointView(e: EndpointHealthRow): EndpointView {
  return {
    origin: e.origin,
    state: e.state,
    consecutive_failures: e.consecutiveFailures,
    attempts_5m: e.attempts5m,
    failures_5m: e.failures5m,
    last_error: e.lastError,
    last_error_at: e.lastErrorAt?.toISOString() ?? null,
    paused_until: e.pausedUntil?.toISOString() ?? null,
    paused_by: e.pausedBy,
    held_until: e.heldUntil?.toISOString() ?? null,
  };
}

export async function listEndpoints(ops: OpsContext): Promise<EndpointView[]> {
  return (await endpointsList(ops.db)).map(endpointView);
}

/** Pauses an origin by hand: its tasks wait, using no attempt, and no probe goes until a resume. */
export async function pauseEndpoint(ops: OpsContext, originText: string): Promise<EndpointView> {
  const origin = originParam(originText);
  await endpointPause(ops.db, origin);
  return endpointView((await endpointGet(ops.db, origin))!);
}

/** Resumes an origin (paused by hand or by failures, or held): its parked tasks are due now, and dispatch is woken. */
export async function resumeEndpoint(ops: OpsContext, originText: string): Promise<EndpointView> {
  const origin = originParam(originText);
  if (!(await endpointResume(ops.db, origin))) throw new NotFoundError(`endpoint ${origin}`);
  ops.poke();
  return endpointView((await endpointGet(ops.db, origin))!);
}
