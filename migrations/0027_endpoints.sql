-- Endpoint health (docs/DESIGN.md §5, "Endpoints"): what Sluice knows of each origin it pushes
-- to (scheme, host and port), kept by the settle (functions/endpoints.sql) and read by the claim
-- (functions/claim.sql), so that an origin that fails again and again is paused, and a
-- Retry-After holds the origin that sent it rather than the whole queue.

-- The origin of a task's URL, as `new URL(url).origin` says it of the href the enqueue stored
-- (scheme and host lower case, a default port left out): the scheme, then the authority less any
-- user information. Immutable, for the index below; its home is here, with that index.
create function sluice.url_origin(p_url text) returns text
language sql immutable parallel safe as $$
  select substring(p_url from '^[a-z][a-z0-9+.-]*://')
         || regexp_replace(substring(p_url from '^[a-z][a-z0-9+.-]*://([^/?#]*)'), '^.*@', '')
$$;

-- One row per origin pushed to lately (swept when idle and healthy):
--   * `consecutive_failures`: failures since its last 2xx (a failure: no connection, a timeout, a
--     5xx but a 503 with Retry-After);
--   * `paused_until`: paused, no task of it is pushed until then: its probe's time; while a probe
--     is out (`probe_task`), that probe's lease end; 'infinity' when paused by hand;
--   * `paused_by`: 'failures' (a 2xx resumes it) or 'hand' (only a resume does);
--   * `pauses`: probes failed since it was paused, the exponent of the probe's backoff;
--   * `held_until`: a Retry-After from it holds it until then;
--   * `failures_total`: every failure since the row was made, for sluice_endpoint_failures_total.
create table sluice.endpoints (
  origin               text primary key,
  consecutive_failures integer not null default 0,
  paused_until         timestamptz,
  paused_by            text check (paused_by in ('failures', 'hand')),
  pauses               integer not null default 0,
  probe_task           bigint,
  held_until           timestamptz,
  last_error           text,
  last_error_at        timestamptz,
  failures_total       bigint not null default 0,
  touched_at           timestamptz not null default now(),
  check ((paused_until is null) = (paused_by is null))
);

-- The origins that may hold tasks back: the claim looks here first (one probe when none does).
create index endpoints_blocking on sluice.endpoints (origin) where paused_until is not null or held_until is not null;

-- Attempts and failures per origin per minute: the sliding window of GET /v1/endpoints (the last
-- five minutes). At most six rows an origin: the sweep drops older minutes.
create table sluice.endpoint_minutes (
  origin   text not null,
  minute   timestamptz not null,
  attempts integer not null default 0,
  failures integer not null default 0,
  primary key (origin, minute)
);

-- A task a claim found due while its origin was held or paused is *parked*: moved to when the
-- hold ends (its run_at), its attempt untouched, so that no claim reads it again meanwhile. A
-- resume (a probe's 2xx, or by hand) makes its parked tasks due at once through this index,
-- which holds the parked tasks only (none, normally).
alter table sluice.tasks add column held boolean not null default false;
create index tasks_origin_held on sluice.tasks (sluice.url_origin(url)) where held;
