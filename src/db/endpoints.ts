/**
 * Endpoint origins as Sluice sees them (migrations/0027_endpoints.sql): their health, a pause or
 * resume by hand, and the sweep that keeps their rows few. What pushes teach them is written by
 * the settle (migrations/functions/endpoints.sql); the claim parks the tasks they hold back.
 */
import type { EndpointState } from '../core/outcome.ts';
import type { Queryable } from './db.ts';

export interface EndpointHealthRow {
  origin: string;
  state: EndpointState;
  consecutiveFailures: number;
  attempts5m: number;
  failures5m: number;
  lastError: string | null;
  lastErrorAt: Date | null;
  /** Paused: when its next probe may go (or, probing, when the probe's lease ends); null when not paused, or paused by hand. */
  pausedUntil: Date | null;
  pausedBy: 'failures' | 'hand' | null;
  /** A Retry-After from it holds its tasks until then. */
  heldUntil: Date | null;
  failuresTotal: number;
}

interface Row {
  origin: string;
  state: EndpointState;
  consecutive_failures: number;
  attempts_5m: number;
  failures_5m: number;
  last_error: string | null;
  last_error_at: Date | null;
  paused_until: Date | null;
  paused_by: 'failures' | 'hand' | null;
  held_until: Date | null;
  failures_total: string;
}

/** The state of a row `e` of sluice.endpoints (`EndpointState`): what GET /v1/endpoints and /metrics show. */
export const ENDPOINT_STATE_SQL = `case when e.paused_until is null then 'healthy'
            when e.probe_task is not null and e.paused_until > now() then 'probing'
            else 'paused' end`;

/**
 * The window is the minute under way and the four before it (between four and five minutes of
 * pushes): whole minutes, so that a row per origin per minute is all it keeps.
 */
const SELECT = `
select e.origin,
       ${ENDPOINT_STATE_SQL} as state,
       e.consecutive_failures,
       coalesce(w.attempts, 0)::int as attempts_5m, coalesce(w.failures, 0)::int as failures_5m,
       e.last_error, e.last_error_at,
       case when e.paused_until = 'infinity' then null else e.paused_until end as paused_until, e.paused_by,
       case when e.held_until > now() then e.held_until end as held_until,
       e.failures_total::text as failures_total
from sluice.endpoints e
left join lateral (
  select sum(m.attempts) as attempts, sum(m.failures) as failures from sluice.endpoint_minutes m
  where m.origin = e.origin and m.minute >= date_trunc('minute', now()) - interval '4 minutes'
) w on true`;

function toHealth(r: Row): EndpointHealthRow {
  return {
    origin: r.origin,
    state: r.state,
    consecutiveFailures: r.consecutive_failures,
    attempts5m: r.attempts_5m,
    failures5m: r.failures_5m,
    lastError: r.last_error,
    lastErrorAt: r.last_error_at,
    pausedUntil: r.paused_until,
    pausedBy: r.paused_by,
    heldUntil: r.held_until,
    failuresTotal: Number(r.failures_total),
  };
}

/** Every origin known, by origin (the sweep keeps them to those pushed to in the last hour, and the paused). */
export async function endpointsList(db: Queryable): Promise<EndpointHealthRow[]> {
  return (await db.query<Row>(`${SELECT} order by e.origin`)).map(toHealth);
}

export async function endpointGet(db: Queryable, origin: string): Promise<EndpointHealthRow | null> {
  const rows = await db.query<Row>(`${SELECT} where e.origin = $1`, [origin]);
  return rows[0] ? toHealth(rows[0]) : null;
}

/** Pauses an origin by hand (made if unknown): none of its tasks is pushed, and no probe goes, until a resume. */
export async function endpointPause(db: Queryable, origin: string): Promise<void> {
  await db.query(
    `insert into sluice.endpoints as e (origin, paused_until, paused_by) values ($1, 'infinity', 'hand')
     on conflict (origin) do update set paused_until = 'infinity', paused_by = 'hand', probe_task = null, touched_at = now()`,
    [origin],
  );
}

/**
 * Resumes an origin by hand: no pause, no hold, no run of failures; the tasks parked behind it
 * are due now. Returns false when the origin is unknown.
 */
export async function endpointResume(db: Queryable, origin: string): Promise<boolean> {
  const rows = await db.query<{ released: number }>(
    `with resumed as (
       update sluice.endpoints
       set paused_until = null, paused_by = null, pauses = 0, probe_task = null, held_until = null, consecutive_failures = 0,
           touched_at = now()
       where origin = $1
       returning origin
     )
     select sluice.endpoints_release(array[origin]) as released from resumed`,
    [origin],
  );
  return rows.length > 0;
}

/**
 * Keeps the rows few: minutes older than the window, holds that ended, and origins neither
 * paused nor held that no push touched for an hour.
 */
export async function endpointsSweep(db: Queryable): Promise<void> {
  await db.query(
    `with minutes as (
       delete from sluice.endpoint_minutes where minute < date_trunc('minute', now()) - interval '5 minutes'
     )
     delete from sluice.endpoints
     where touched_at < now() - interval '1 hour' and paused_until is null and (held_until is null or held_until <= now())`,
  );
  await db.query(
    `update sluice.endpoints set held_until = null
     where (paused_until is not null or held_until is not null) and held_until <= now()`,
  );
}
