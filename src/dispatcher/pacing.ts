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
  /** Tasks claimed ahead, waiting for a place. */
  ready: number;
  /** How many tasks to hold claimed beyond the places (`ClaimAhead.ahead`); 0 claims only for free places. */
  ahead: number;
  /** The places' use during one claim's round trip (`ClaimAhead.perClaim`): the least worth a pass while busy. */
  perClaim: number;
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
  const held = p.inFlight + p.ready;
  const room = Math.min(p.parallelism + p.ahead - held, left);
  // While pushes are in flight, a pass waits until a quarter of the places are free, rounded
  // up, or as many as the places use during a claim's round trip: a few passes of many tasks
  // each, rather than one pass per push that ends. Two of a Worker shard's six at least: with
  // one, every push cost a pass, and sixteen shards' passes queued on the claim lock
  // (docs/performance.md).
  const passSize = Math.max(1, Math.ceil(p.parallelism / 4), p.perClaim);
  const enough = held === 0 || room >= Math.min(passSize, left);
  if (room > 0 && enough && (p.freed || p.lastPassFull)) return { kind: 'claim', max: Math.min(room, p.maxClaimBatch) };
  if (held === 0 && p.settling === 0 && p.background === 0 && p.reaped && !p.freed) return { kind: 'idle' };
  return { kind: 'wait' };
}

/**
 * Whether a place freed (a push's end, or its settle's commit) is worth a claim pass. Only
 * after a pass that filled every place it asked for: after one that found less, what held the
 * rest back was not the places, and only a slot's release (the settle's commit), a poke or a due
 * time can change that; and a slot's release only while work waits for a pass (the settle says
 * so: db/settle.ts, `workWaits`). An idle dispatcher made three passes a task, the last two
 * always in vain; now one. (A run that finds it not worth one still looks at its state.)
 */
export function freedPlaceWorthAPass(lastPassFull: boolean, workWaits: boolean): boolean {
  return lastPassFull || workWaits;
}

/**
 * How far a run claims ahead of its free places (docs/DESIGN.md §6, "Claiming ahead"), from
 * what it measures: a claim's round trip and a push's length. A place frees every
 * `pushMs / parallelism` on average, so during one claim's round trip the places use
 * `parallelism × claimMs / pushMs` tasks (Little's law): `perClaim`. Holding twice that claimed
 * (`ahead`) lets one pass be on its way while the last one's tasks are pushed, so that with
 * Postgres far away a freed place finds a task already leased instead of waiting a round trip.
 * Near, it is a few tasks; with slow endpoints, none. Each task held is a lease, counted by every
 * limit from its claim, so limits stay exact; what it costs is that lease's wait for a place.
 */
export class ClaimAhead {
  readonly #parallelism: number;
  readonly #maxClaimBatch: number;
  #claimMs: number | null = null;
  #pushMs: number | null = null;

  constructor(parallelism: number, maxClaimBatch: number) {
    this.#parallelism = parallelism;
    this.#maxClaimBatch = maxClaimBatch;
  }

  /** A claim pass took `ms`, from its call to its answer. */
  claimTook(ms: number): void {
    this.#claimMs = ewma(this.#claimMs, ms);
  }

  /** A push took `ms`, from its start to its answer (or its failure). */
  pushTook(ms: number): void {
    this.#pushMs = ewma(this.#pushMs, ms);
  }

  /** The tasks the places use during one claim's round trip; 0 until both are measured. */
  get perClaim(): number {
    if (this.#claimMs === null || this.#pushMs === null) return 0;
    return Math.min(this.#maxClaimBatch, Math.ceil((this.#parallelism * this.#claimMs) / Math.max(this.#pushMs, 1)));
  }

  /** Tasks to hold claimed beyond the places. */
  get ahead(): number {
    return Math.min(this.#maxClaimBatch, 2 * this.perClaim);
  }
}

/** A moving average that follows a change within a few samples. */
const ewma = (average: number | null, sample: number) => (average === null ? sample : average + 0.2 * (sample - average));
