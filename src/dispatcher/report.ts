/** What one dispatcher run did, and when the next thing comes due: what its caller schedules by. */

export interface RunReport {
  claimPasses: number;
  claimed: number;
  succeeded: number;
  retried: number;
  deferred: number;
  dead: number;
  /** Expired leases settled as timed-out attempts. */
  reaped: number;
  /** Settlements whose lease was gone by the time they were written. */
  lost: number;
  /** Pushes answered with `Sluice-Ack: lease`: the endpoint holds the lease. */
  leaseKept: number;
  /** Pushes that timed out or lost their connection: their leases are held until they expire. */
  unanswered: number;
  /** Tasks enqueued by schedules that came due (docs/guide.md "Schedules"). */
  fired: number;
  /** Database round trips: reap, claim passes, settle writes and the next-due probe. */
  roundTrips: number;
  /** The run stopped for its budget (time, pushes) rather than for want of work: run again at once. */
  more: boolean;
  /** When the run ended with nothing claimable: ms until the next task or lease comes due; `null` = nothing waits on time. */
  nextDueInMs: number | null;
  /** When the run's last claim pass was sent (its clock); `null` = it made none. A nudge before it was served. */
  lastClaimAtMs: number | null;
}

/** A report of a run that has done nothing yet. */
export function emptyReport(): RunReport {
  return {
    claimPasses: 0,
    claimed: 0,
    succeeded: 0,
    retried: 0,
    deferred: 0,
    dead: 0,
    reaped: 0,
    lost: 0,
    leaseKept: 0,
    unanswered: 0,
    fired: 0,
    roundTrips: 0,
    more: false,
    nextDueInMs: null,
    lastClaimAtMs: null,
  };
}

/** The run did work (claimed, reaped or fired something): the deployment is not at rest (core/rest.ts). */
export const didWork = (report: RunReport): boolean => report.claimed + report.reaped + report.fired > 0;
