/**
 * A run's places (docs/DESIGN.md §6): the pushes in flight, at most `parallelism`; the tasks
 * claimed ahead, waiting for a place; and the settles of ended pushes, written meanwhile (group
 * commit), so that the next claim pass need not wait for them. A place frees when its push
 * ends, and a task claimed ahead takes it at once. Until a settle commits, its lease still counts
 * against every limit (a pass may take less, never more), so its commit frees the slot again,
 * as a push's end frees a place: the run hears of both (`onFreed`).
 */
import { classifyPush, type PushResult, takenBack } from '../core/outcome.ts';
import type { LeasedTask } from '../core/types.ts';
import { leaseEnding } from '../db/settle.ts';
import type { ClaimAhead } from './pacing.ts';
import type { outcomeRecorder } from './record.ts';
import type { Settler } from './settler.ts';

export interface PlacesDeps {
  parallelism: number;
  now: () => number;
  /** Once true, no waiting task is started. */
  stopped: () => boolean;
  push: (task: LeasedTask, waitedMs: number) => Promise<PushResult>;
  record: ReturnType<typeof outcomeRecorder>;
  settler: Settler;
  ahead: ClaimAhead;
  /** Told of every push that ended, and when it began. */
  pushed?: ((task: LeasedTask, result: PushResult, startedAtMs: number) => void) | undefined;
  /** A place freed: a push ended (`workWaits` false), or its settle committed (`workWaits` from the settle). */
  onFreed: (workWaits: boolean) => void;
  log: Pick<Console, 'error'>;
}

/** Task priority, then due time, then id: the order within a key, applied to one claim's tasks. */
function bestFirst(a: LeasedTask, b: LeasedTask): number {
  return a.priority - b.priority || a.runAt.getTime() - b.runAt.getTime() || Number(BigInt(a.id) - BigInt(b.id));
}

export class Places {
  /** Pushes in flight. */
  readonly inFlight = new Set<Promise<void>>();
  /** Tasks claimed ahead of a free place (pacing.ts `ClaimAhead`), with when their claim answered. */
  readonly ready: Array<{ task: LeasedTask; claimedAt: number }> = [];
  /** Ended pushes whose settle is not yet written. */
  readonly settling = new Set<Promise<void>>();
  readonly #deps: PlacesDeps;

  constructor(deps: PlacesDeps) {
    this.#deps = deps;
  }

  /** Tasks held: in flight or waiting for a place. */
  get held(): number {
    return this.inFlight.size + this.ready.length;
  }

  /**
   * A claim's tasks, best first as the claim chose them (its rows come back in no order): a
   * place frees for one task at a time when the run is busy. They take free places at once.
   */
  take(batch: readonly LeasedTask[], claimedAt: number): void {
    for (const task of [...batch].sort(bestFirst)) this.ready.push({ task, claimedAt });
    this.fill();
  }

  /** Starts the tasks that wait, while places are free (not once the run is told to stop). */
  fill(): void {
    const { parallelism, stopped, now } = this.#deps;
    while (this.ready.length > 0 && this.inFlight.size < parallelism && !stopped()) {
      const next = this.ready.shift() as { task: LeasedTask; claimedAt: number };
      this.#start(next.task, now() - next.claimedAt);
    }
  }

  /** Pushes one task, `waitedMs` after its claim answered (its lease ran meanwhile). */
  #start(task: LeasedTask, waitedMs: number): void {
    const startedAt = this.#deps.now();
    const work: Promise<void> = this.#deps
      .push(task, waitedMs)
      .then((result: PushResult) => this.#ended(task, result, startedAt))
      .catch((error: unknown) => this.#deps.log.error(`sluice: pushing task ${task.id} failed; its lease will expire`, error))
      .finally(() => {
        this.inFlight.delete(work);
        this.fill();
        this.#deps.onFreed(false);
      });
    this.inFlight.add(work);
  }

  /** A push ended: its outcome is settled (group commit), and its commit may free a slot. */
  #ended(task: LeasedTask, result: PushResult, startedAt: number): void {
    const { ahead, pushed, record, settler, log, now, onFreed } = this.#deps;
    ahead.pushTook(result.durationMs);
    // What observes a push never costs its settle.
    try {
      pushed?.(task, result, startedAt);
    } catch (error) {
      log.error('sluice: recording a push (spans) failed', error);
    }
    const written = record(task, classifyPush(result, now()), result.durationMs).finally(() => {
      this.settling.delete(written);
      onFreed(settler.workWaits);
    });
    this.settling.add(written);
  }

  /** The run ends: pushes made are awaited, and tasks claimed ahead are given back unused, no attempt spent. */
  async empty(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    const unused = this.ready.splice(0).map((r) => r.task);
    await Promise.all(
      unused.map((task) =>
        this.#deps.settler
          .settle(leaseEnding(task, takenBack('the dispatcher stopped before pushing it', this.#deps.now()), null))
          .catch((error: unknown) => this.#deps.log.error(`sluice: giving back task ${task.id} failed; its lease will expire`, error)),
      ),
    );
  }
}
