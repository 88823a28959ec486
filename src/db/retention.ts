/**
 * What each sweep deletes besides history: rate-limit grants past their period, which count
 * against nothing (0011_rate_limits.sql), levels that learnt nothing for an hour
 * (0016_levels.sql), and the lanes of keys idle for a minute that hold no unfinished task
 * (migrations/functions/claim.sql `lanes_sweep`), so that their rows stay bounded by the keys in use.
 */
import type { Queryable } from './db.ts';

/** Deletes the rate-limit grants whose period is over; returns how many. */
export async function rateGrantsSweep(db: Queryable): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    'with gone as (delete from sluice.rate_grants where until < now() returning 1) select count(*)::int as n from gone',
  );
  return row?.n ?? 0;
}

/** Deletes the rate buckets that are full again (their arrival time passed: as good as none); returns how many. */
export async function rateBucketsSweep(db: Queryable): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    'with gone as (delete from sluice.rate_buckets where tat < now() returning 1) select count(*)::int as n from gone',
  );
  return row?.n ?? 0;
}

/** A level whose learnt limit did not move for this long, and is not held, goes back to its configured limit. */
export const LEVEL_IDLE_MS = 3_600_000;

/** Deletes the levels that are not held and whose learnt limit has not moved for `LEVEL_IDLE_MS`; returns how many. */
export async function levelsSweep(db: Queryable): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    `with gone as (
       delete from sluice.levels
       where (held_until is null or held_until < now()) and coalesce(moved_at, '-infinity') < now() - make_interval(secs => $1 / 1000.0)
       returning 1
     ) select count(*)::int as n from gone`,
    [LEVEL_IDLE_MS],
  );
  return row?.n ?? 0;
}

/** A keyed lane that held no unfinished task and that nothing touched for this long is deleted. */
export const LANE_IDLE_MS = 60_000;
/** Lanes deleted by one statement at most (each is locked until its transaction ends). */
const LANES_PER_STATEMENT = 5_000;
/** Statements one sweep runs at most: 100,000 lanes a sweep, more than a sweep's worth of new keys at 1,500 a second. */
const LANE_STATEMENTS = 20;

export interface LanesSweepOptions {
  /** How long a lane must have been idle; default `LANE_IDLE_MS`. */
  idleMs?: number;
  /** Lanes a statement deletes at most; default 5,000. */
  perStatement?: number;
  /** The sweep's clock (tests move time); default the database's. */
  now?: Date;
}

/** Deletes the lanes of keys idle for `idleMs` that hold no unfinished task (`sluice.lanes_sweep`); returns how many. */
export async function lanesSweep(db: Queryable, options: LanesSweepOptions = {}): Promise<number> {
  const perStatement = options.perStatement ?? LANES_PER_STATEMENT;
  let gone = 0;
  for (let i = 0; i < LANE_STATEMENTS; i++) {
    const [row] = await db.query<{ n: number }>('select sluice.lanes_sweep($1, $2, $3) as n', [
      perStatement,
      options.idleMs ?? LANE_IDLE_MS,
      options.now ?? null,
    ]);
    const n = row?.n ?? 0;
    gone += n;
    if (n < perStatement) break;
  }
  return gone;
}
