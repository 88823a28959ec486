/**
 * The housekeeping besides dispatch, in one list (docs/DESIGN.md §6, "Chores"): the retention
 * sweep (history buckets, rate grants, levels, lanes of idle keys, spent debounces), the task
 * counts of /metrics, and the endpoints' minutes and idle origins (db/endpoints.ts). Each has its interval; `runDue` runs those whose time has come, one run of
 * each at a time, and never throws (a chore that failed runs again at its next turn). Who runs
 * them: the Node server on a timer, the Worker's cron and its first pusher shard; none of them
 * while the deployment is at rest (core/rest.ts), so an idle deployment sends Postgres nothing.
 */
import type { Config } from '../config.ts';
import type { Queryable } from '../db/db.ts';
import { endpointsSweep } from '../db/endpoints.ts';
import { isTransientDbError, loggable } from '../db/faults.ts';
import { taskCountsRefresh } from '../db/metrics.ts';
import { sweepFinished, sweepIntervalMs } from './retention.ts';
import { withDbRetry } from './retry-db.ts';

export type ChoreName = 'sweep' | 'counts' | 'endpoints';

interface Chore {
  name: ChoreName;
  everyMs(config: Config): number;
  run(db: Queryable, config: Config): Promise<unknown>;
}

/** How often tasks are counted for /metrics where a process counts them on a timer. */
export const COUNT_INTERVAL_MS = 15_000;

/** How often the endpoints' rows are swept: a minute, the width of their window's buckets. */
export const ENDPOINTS_SWEEP_MS = 60_000;

export const CHORES: readonly Chore[] = [
  { name: 'sweep', everyMs: sweepIntervalMs, run: (db, config) => sweepFinished(db, config) },
  { name: 'counts', everyMs: () => COUNT_INTERVAL_MS, run: (db) => withDbRetry(() => taskCountsRefresh(db)) },
  { name: 'endpoints', everyMs: () => ENDPOINTS_SWEEP_MS, run: (db) => withDbRetry(() => endpointsSweep(db)) },
];

/**
 * The chores' turns. The database is given at each call, not kept: a Worker shard's connection
 * closes between drains, and a chore must run on the one open now.
 */
export class Chores {
  readonly #config: Config;
  readonly #log: Pick<Console, 'error'>;
  /** When each chore may run next (epoch ms); absent = now. */
  readonly #next = new Map<ChoreName, number>();
  readonly #running = new Map<ChoreName, Promise<void>>();
  /** Chores whose last turn found the database not answering (said once). */
  readonly #unreachable = new Set<ChoreName>();

  constructor(config: Config, log: Pick<Console, 'error'> = console) {
    this.#config = config;
    this.#log = log;
  }

  /** Runs on `db` every chore (of `only`, if given) whose time has come; resolves when they are done. */
  async runDue(db: Queryable, nowMs: number, only?: readonly ChoreName[]): Promise<void> {
    const due = CHORES.filter((c) => (!only || only.includes(c.name)) && nowMs >= (this.#next.get(c.name) ?? 0));
    await Promise.all(due.map((chore) => this.#run(db, chore, nowMs)));
  }

  /** Waits for the chores under way (closing). */
  async settled(): Promise<void> {
    await Promise.all(this.#running.values());
  }

  #run(db: Queryable, chore: Chore, nowMs: number): Promise<void> {
    const running = this.#running.get(chore.name);
    if (running) return running;
    this.#next.set(chore.name, nowMs + chore.everyMs(this.#config));
    const run = chore
      .run(db, this.#config)
      .then(
        () => {
          this.#unreachable.delete(chore.name);
        },
        (error: unknown) => {
          // A database that does not answer is said once, in one line, until a turn succeeds:
          // a chore tries every second on Node, and a stack a second says nothing more.
          if (!isTransientDbError(error)) this.#log.error(`sluice: the ${chore.name} chore failed`, error);
          else if (!this.#unreachable.has(chore.name)) {
            this.#unreachable.add(chore.name);
            this.#log.error(`sluice: the ${chore.name} chore failed: ${loggable(error)}; it tries again at each turn`);
          }
        },
      )
      .finally(() => this.#running.delete(chore.name));
    this.#running.set(chore.name, run);
    return run;
  }
}
