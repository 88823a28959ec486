/**
 * What a run knows of the time to the database and of the next due time (docs/DESIGN.md §6,
 * "Lingering runs"): the shortest round trip seen, the last read of the next due time, and
 * whether acting on due times brings nothing (a stall), so that a lingering run sends its claim
 * one way ahead of a due time, and leaves a stall to its caller's backoff.
 */
import type { Db } from '../db/db.ts';
import { nextDueInMs } from '../db/due.ts';
import type { RunReport } from './report.ts';
import { type RetryOptions, withDbRetry } from './retry-db.ts';
import type { Timers } from './timers.ts';

/** A read of the next due time: `inMs` counted where it ran, answered at `atMs` (the run's clock). */
export type DueRead = { inMs: number | null; atMs: number };

/** What executing a statement adds to a round trip, taken off half of one to estimate the way there. */
const ONE_WAY_MARGIN_MS = 2;

export class DueReads {
  /** The last read of the next due time, or null (none yet, or one made stale by work since). */
  last: DueRead | null = null;
  readonly #db: Db;
  readonly #timers: Timers;
  readonly #report: RunReport;
  /** The shortest round trip to the database seen: a claim's or a read's, from call to answer. */
  #rttMs = Number.POSITIVE_INFINITY;
  /** Which linger is the latest: a read made for an earlier one is not this one's answer. */
  #lingers = 0;
  /** The run's progress when a due time last ended a linger, and how many times in a row it brought none. */
  #actedAt = -1;
  #inVain = 0;

  readonly #retry: RetryOptions & { timers: Timers };

  /** `retry`: how a failed read is retried, and the timers of the run (its clock). */
  constructor(db: Db, report: RunReport, retry: RetryOptions & { timers: Timers }) {
    this.#db = db;
    this.#timers = retry.timers;
    this.#report = report;
    this.#retry = retry;
  }

  /** A statement went and came back in `ms`. */
  roundTrip(ms: number): void {
    this.#rttMs = Math.min(this.#rttMs, ms);
  }

  /** Reads when the next thing comes due. */
  async read(): Promise<DueRead> {
    this.#report.roundTrips++;
    const sentAt = this.#timers.now();
    const inMs = await withDbRetry(() => nextDueInMs(this.#db), this.#retry);
    const atMs = this.#timers.now();
    this.roundTrip(atMs - sentAt);
    return { inMs, atMs };
  }

  /**
   * A linger begins, the run's `progress` so far: its number, and whether due times are stalled.
   * Work that reads due and yields nothing when acted on twice in a row (a stall: core/wake.ts)
   * is left to the caller's backoff rather than read and claimed again and again. Once is no
   * stall: a claim timed by a round trip that was long for once can arrive too early.
   */
  lingerBegins(progress: number): { mine: number; stalled: boolean } {
    if (this.#actedAt >= 0) this.#inVain = this.#actedAt === progress ? this.#inVain + 1 : 0;
    this.#actedAt = -1;
    this.last = null;
    return { mine: ++this.#lingers, stalled: this.#inVain >= 2 };
  }

  /** The answer of linger `mine`'s read, kept only if no later linger began. */
  answered(mine: number, answer: DueRead): void {
    if (mine === this.#lingers) this.last = answer;
  }

  /** A due time ended a linger, at the run's `progress`. */
  actedOn(progress: number): void {
    this.#actedAt = progress;
  }

  /**
   * When to send the claim for the next due time, on the run's clock: `inMs` was counted where
   * the read ran, a way back before its answer came (`atMs`); the claim takes a way there: sent
   * a round trip before, it arrives as the task comes due. Never, when unknown or stalled.
   */
  claimAt(stalled: boolean): number {
    const known = this.last;
    return known?.inMs == null || stalled ? Number.POSITIVE_INFINITY : known.atMs + known.inMs - 2 * this.#oneWayMs();
  }

  /**
   * The way to the database, one direction: half the shortest round trip, less what executing
   * a statement takes (a couple of ms), so that it errs short: a claim timed by it rarely
   * arrives before its task is due (and one that does is sent again).
   */
  #oneWayMs(): number {
    return Number.isFinite(this.#rttMs) ? Math.max(0, this.#rttMs / 2 - ONE_WAY_MARGIN_MS) : 0;
  }

  /** The next due time from now, for the run's report: null when nothing is due. */
  nextDueInMs(): number | null {
    const last = this.last;
    return last?.inMs == null ? null : Math.max(0, Math.ceil(last.inMs - (this.#timers.now() - last.atMs)));
  }
}
