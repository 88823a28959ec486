/**
 * When a dispatcher run claims, and how many: a pure decision from what the run knows at that
 * moment, so that the rules read (and are tested) apart from the loop that follows them.
 */

/** What a run knows when it decides its next step. */
export interface Pace {
  /** Pushes this run may have in flight at once. */
  parallelism: number;
  /** Most tasks one claim pass may take. */
  maxClaimBatch: number;
  /** Pushes this run may start in all (a Worker invocation's subrequests); `Infinity` = no limit. */
  maxPushes: number;
  /** Tasks claimed so far. */
  claimed: number;
  /** Pushes in flight. */
  inFlight: number;
  /** Ended pushes whose settle is not yet written. */
  settling: number;
  /** Reaps, schedule firings and due-time reads still running. */
  background: number;
  /** A place was freed (a push or settle ended, work came due) since the last claim pass began. */
  freed: boolean;
  /** The last claim pass took all it asked for: there may be more. */
  lastPassFull: boolean;
  /** The run's first reap has ended. */
  reaped: boolean;
}

export type Step =
  /** Claim up to `max` tasks now. */
  | { kind: 'claim'; max: number }
  /** Wait for a push to end, a settle to be written, or a nudge. */
  | { kind: 'wait' }
  /** Nothing in flight, nothing freed, nothing running: the run is done. */
  | { kind: 'idle' };

export function nextStep(p: Pace): Step {
  const left = p.maxPushes - p.claimed;
  const room = Math.min(p.parallelism - p.inFlight, left);
  // While pushes are in flight, a pass waits until a quarter of the places are free, rounded
  // up: a few passes of many tasks each, rather than one pass per push that ends. Two of a
  // Worker shard's six: with one, every push cost a pass, and sixteen shards' passes queued on
  // the claim lock (docs/performance.md). (Nothing is claimed ahead of a free place: a lease is
  // a slot, and one waiting here would hold it idle.)
  const passSize = Math.max(1, Math.ceil(p.parallelism / 4));
  const enough = p.inFlight === 0 || room >= Math.min(passSize, left);
  if (room > 0 && enough && (p.freed || p.lastPassFull)) return { kind: 'claim', max: Math.min(room, p.maxClaimBatch) };
  if (p.inFlight === 0 && p.settling === 0 && p.background === 0 && p.reaped && !p.freed) return { kind: 'idle' };
  return { kind: 'wait' };
}
