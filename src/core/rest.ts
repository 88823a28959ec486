/**
 * A deployment at rest (docs/DESIGN.md §6, "At rest"): when no work has been seen for a while
 * and nothing is due, Sluice sends Postgres nothing at all, so that a database that bills by the
 * second (Neon suspends a compute after 5 idle minutes) can stop. No housekeeping, no fallback
 * poll, no reconnect of a dropped LISTEN connection: the next enqueue, lease call or API call,
 * or the next due time, ends the rest. Pure: the clock is passed in.
 */

/** How long after the last work the housekeeping goes on before a deployment rests: `SLUICE_REST_AFTER_MS`. */
export const DEFAULT_REST_AFTER_MS = 120_000;

/** What a deployment knows of its work, without asking Postgres. */
export interface RestState {
  /** When work was last seen (epoch ms): an API event, or a dispatch run that did something. */
  lastWorkMs: number;
  /** When the next thing is due (epoch ms), as the last run read it; `null` = nothing waits on time. */
  nextDueAtMs: number | null;
}

/**
 * At rest: no work for `restAfterMs`, and nothing due by now (a due time still ahead wakes
 * dispatch when it comes; one that has passed unserved means a wake-up was lost).
 */
export function atRest(state: RestState, nowMs: number, restAfterMs: number): boolean {
  return nowMs - state.lastWorkMs >= restAfterMs && (state.nextDueAtMs === null || state.nextDueAtMs > nowMs);
}

/**
 * A long-lived process's view of its rest (the Node server): told of work and of due times,
 * asked whether to touch Postgres; `onWake` listeners run when work ends a rest.
 */
export class RestClock {
  #state: RestState;
  readonly #restAfterMs: number;
  readonly #now: () => number;
  readonly #woken = new Set<() => void>();

  constructor(restAfterMs: number, now: () => number = Date.now) {
    this.#restAfterMs = restAfterMs;
    this.#now = now;
    // A process that just started has work to assume: what it missed while down.
    this.#state = { lastWorkMs: now(), nextDueAtMs: null };
  }

  /** Work was seen now (a poke, an API request, a run that did something). */
  worked(): void {
    const resting = this.resting();
    this.#state.lastWorkMs = this.#now();
    if (resting) for (const listener of [...this.#woken]) listener();
  }

  /** The next due time a run read (epoch ms), or `null`. */
  due(atMs: number | null): void {
    this.#state.nextDueAtMs = atMs;
  }

  resting(): boolean {
    return atRest(this.#state, this.#now(), this.#restAfterMs);
  }

  /** Calls `listener` each time work ends a rest; returns its removal. */
  onWake(listener: () => void): () => void {
    this.#woken.add(listener);
    return () => this.#woken.delete(listener);
  }
}
