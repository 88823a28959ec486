/**
 * `sluice tail`: follows tasks as they are enqueued, change state and finish, by polling the
 * list API with its cursor. The API has no change feed, and an index of update times would cost
 * every claim and settle a write, so tail composes what exists: the newest-first listing finds
 * new tasks, and the tasks it follows are re-read from the same pages (older ones one by one).
 */
import { doublingBackoffMs } from '../../core/retry.ts';
import type { TaskDetail, TaskList, TaskStatus, TaskView } from '../../protocol/wire.ts';
import { Interrupted } from '../api.ts';
import { intFlag, stringFlag } from '../args.ts';
import type { Command, Context } from '../context.ts';
import { seg } from '../context.ts';
import { ApiError } from '../errors.ts';
import { short, time } from '../output.ts';
import { sleep, transient } from '../polling.ts';

/** Unfinished tasks followed at once; beyond this the oldest are let go. */
const MAX_FOLLOWED = 1_000;
/** Followed tasks older than the pages just read, re-read one by one per poll. */
const MAX_SINGLE_READS = 50;
/**
 * Ids come from a sequence but enqueues commit in any order: task 100 may appear after 101 was
 * seen. Each poll re-reads ids that were not yet the newest seen this long ago (by tail's own
 * clock, so the server's does not matter), and reports any it has not reported.
 */
const LOOK_BACK_MS = 5_000;
/** Rows already seen that one poll re-reads at most, so a busy Sluice costs a few pages. */
const MAX_LOOK_BACK_ROWS = 1_000;
/** The first poll reads this many (or --lines): the ones not shown are known, not new. */
const FIRST_PAGE = 100;
/** Ids remembered as reported, at most: many times what one poll re-reads. */
const MAX_SEEN = 10 * MAX_LOOK_BACK_ROWS;
const FINISHED: ReadonlySet<TaskStatus> = new Set(['succeeded', 'dead', 'cancelled', 'expired']);

type Event = 'recent' | 'new' | 'changed' | 'finished';

interface Followed {
  status: TaskStatus;
  attempts: number;
  cancelRequested: boolean;
  /** When this task was last re-read on its own (round-robin among the old ones). */
  readAt: number;
}

export const tail: Command = {
  words: ['tail'],
  args: [],
  flags: [
    { name: 'queue', value: 'QUEUE', help: 'only this queue' },
    { name: 'key', value: 'KEY', help: 'only this concurrency key' },
    { name: 'interval', value: 'MS', help: 'time between polls. Default: 1000' },
    { name: 'lines', value: 'N', help: 'recent tasks to show first. Default: 10' },
  ],
  summary: 'follow new tasks and their changes and finishes, until Ctrl-C',
  details: [
    'Prints each new task, each change of state (leased, retried) and each finish.',
    '',
    'How it works: every --interval ms it asks GET /v1/tasks (newest first, paging with next_cursor)',
    'for the tasks enqueued since the newest one it has seen, and re-reads the unfinished tasks it',
    'follows: from the same pages, or with GET /v1/tasks/ID each for older ones (at most',
    `${MAX_SINGLE_READS} per poll). It follows at most ${MAX_FOLLOWED} unfinished tasks, the newest. A change between`,
    'two polls is seen as one (a quick retry shows as a new attempt count). Enqueues may commit out of',
    `order (task 100 after 101), so each poll also re-reads the ids of the last ${LOOK_BACK_MS / 1_000} s (at most`,
    `${MAX_LOOK_BACK_ROWS} tasks already seen) and reports any it has not. If Sluice stops answering after the`,
    'first poll, tail says so on stderr and keeps trying. Ctrl-C ends it with exit code 0, and so does',
    'a reader of its output that went away (sluice tail | head -5), at the next line tail prints;',
    'SIGTERM ends it with 143.',
    '',
    "Each line: the time of the event (the task's created or updated time), the event (recent, new,",
    'changed, finished), id, queue, key, status, attempts and the last error. With --json, one object',
    'per line: {"event": "new", "task": {...}} with the task as GET /v1/tasks lists it.',
  ].join('\n'),
  run: (context, parsed) =>
    new Tail(context, {
      queue: stringFlag(parsed, 'queue'),
      key: stringFlag(parsed, 'key'),
      intervalMs: intFlag(parsed, 'interval', { min: 100, max: 3_600_000 }) ?? 1_000,
      lines: intFlag(parsed, 'lines', { min: 0, max: 500 }) ?? 10,
    }).run(),
};

interface TailOptions {
  queue: string | undefined;
  key: string | undefined;
  intervalMs: number;
  lines: number;
}

class Tail {
  readonly #c: Context;
  readonly #o: TailOptions;
  /** Set by the first poll, even one that finds nothing: what comes after it is new. */
  #started = false;
  /** The newest task id seen. */
  #newest = 0n;
  /** Ids at or below it are never new: older than tail's start, or than the look-back. */
  #floor = 0n;
  /** The newest id after each recent poll, and when: it becomes the floor LOOK_BACK_MS later. */
  readonly #marks: Array<{ at: number; newest: bigint }> = [];
  /** Ids above the floor already reported (or known at the start), so that none shows twice. */
  readonly #seen = new Set<string>();
  readonly #followed = new Map<string, Followed>();

  constructor(context: Context, options: TailOptions) {
    this.#c = context;
    this.#o = options;
  }

  async run(): Promise<void> {
    const { signal } = this.#c;
    try {
      await this.#poll(); // A first failure ends tail with its exit code: the settings are likely wrong.
      let failures = 0;
      while (!signal.aborted) {
        await sleep(doublingBackoffMs(failures + 1, this.#o.intervalMs, 30_000), signal);
        if (signal.aborted) break;
        try {
          await this.#poll();
          failures = 0;
        } catch (error) {
          if (!transient(error)) throw error;
          failures++;
          this.#c.out.warn(error, 'tail goes on trying');
        }
      }
    } catch (error) {
      if (!(error instanceof Interrupted)) throw error;
    }
  }

  async #poll(): Promise<void> {
    const rows = this.#started ? await this.#readSince(this.#moveFloor()) : await this.#readStart();
    for (const t of rows.filter((t) => BigInt(t.id) > this.#floor && !this.#seen.has(t.id)).reverse()) {
      this.#seen.add(t.id);
      this.#arrived(t, this.#started ? 'new' : 'recent');
    }
    if (rows.length && BigInt(rows[0]!.id) > this.#newest) this.#newest = BigInt(rows[0]!.id);
    this.#started = true;
    this.#marks.push({ at: performance.now(), newest: this.#newest });

    // Followed tasks within the pages just read are compared from them; older ones are read one by one.
    const oldest = rows.length ? BigInt(rows.at(-1)!.id) : null;
    const byId = new Map(rows.map((t) => [t.id, t]));
    const older: string[] = [];
    for (const id of [...this.#followed.keys()]) {
      const row = byId.get(id);
      if (row) this.#compare(row);
      else if (oldest === null || BigInt(id) < oldest) older.push(id);
    }
    const due = older.sort((a, b) => this.#followed.get(a)!.readAt - this.#followed.get(b)!.readAt).slice(0, MAX_SINGLE_READS);
    for (const id of due) {
      this.#followed.get(id)!.readAt = Date.now();
      try {
        this.#compare(await this.#c.api.get<TaskDetail>(`/v1/tasks/${seg(id)}`));
      } catch (error) {
        // Gone (retention deletes only finished tasks, so rarely): stop following it.
        if (error instanceof ApiError && error.status === 404) this.#followed.delete(id);
        else throw error;
      }
    }
  }

  /** The first poll: one page, whose newest --lines show as recent; the others are known, not new. */
  async #readStart(): Promise<TaskView[]> {
    const page = await this.#list(Math.max(this.#o.lines, FIRST_PAGE), null);
    for (const t of page.tasks.slice(this.#o.lines)) this.#seen.add(t.id);
    // Tasks older than the page were there before tail: not new when a later page shows them.
    if (page.next_cursor !== null) this.#floor = BigInt(page.tasks.at(-1)!.id) - 1n;
    return page.tasks;
  }

  /** Newest first, down to the floor or to MAX_LOOK_BACK_ROWS rows already seen, whichever comes first. */
  async #readSince(floor: bigint): Promise<TaskView[]> {
    const rows: TaskView[] = [];
    let cursor: string | null = null;
    let lookedBack = 0;
    do {
      const page = await this.#list(rows.length === 0 ? 100 : 500, cursor);
      rows.push(...page.tasks);
      lookedBack += page.tasks.filter((t) => BigInt(t.id) <= this.#newest).length;
      cursor = page.next_cursor;
    } while (cursor !== null && BigInt(rows.at(-1)!.id) > floor && lookedBack < MAX_LOOK_BACK_ROWS);
    return rows;
  }

  /** Raises the floor to the newest id seen LOOK_BACK_MS ago, and forgets the ids it passed. */
  #moveFloor(): bigint {
    const now = performance.now();
    while (this.#marks.length > 0 && now - this.#marks[0]!.at >= LOOK_BACK_MS) {
      const { newest } = this.#marks.shift()!;
      if (newest > this.#floor) this.#floor = newest;
    }
    for (const id of this.#seen) if (BigInt(id) <= this.#floor) this.#seen.delete(id);
    // A busy Sluice: the oldest go first, far below what a poll re-reads.
    for (const id of this.#seen) {
      if (this.#seen.size <= MAX_SEEN) break;
      this.#seen.delete(id);
    }
    return this.#floor;
  }

  #list(limit: number, cursor: string | null): Promise<TaskList> {
    const q = new URLSearchParams({ limit: String(limit) });
    if (this.#o.queue !== undefined) q.set('queue', this.#o.queue);
    if (this.#o.key !== undefined) q.set('concurrency_key', this.#o.key);
    if (cursor !== null) q.set('cursor', cursor);
    return this.#c.api.get<TaskList>(`/v1/tasks?${q}`);
  }

  #arrived(task: TaskView, event: 'recent' | 'new'): void {
    this.#emit(event, task);
    if (FINISHED.has(task.status)) {
      // Finished between two polls: a follower waiting for its finish still sees one.
      if (event === 'new') this.#emit('finished', task);
      return;
    }
    this.#followed.set(task.id, { status: task.status, attempts: task.attempts, cancelRequested: task.cancel_requested, readAt: 0 });
    if (this.#followed.size > MAX_FOLLOWED) this.#followed.delete(this.#followed.keys().next().value!);
  }

  #compare(task: TaskView): void {
    const was = this.#followed.get(task.id);
    if (!was) return;
    if (was.status === task.status && was.attempts === task.attempts && was.cancelRequested === task.cancel_requested) return;
    if (FINISHED.has(task.status)) {
      this.#followed.delete(task.id);
      this.#emit('finished', task);
      return;
    }
    Object.assign(was, { status: task.status, attempts: task.attempts, cancelRequested: task.cancel_requested });
    this.#emit('changed', task);
  }

  #emit(event: Event, t: TaskView): void {
    const at = event === 'recent' || event === 'new' ? t.created_at : t.updated_at;
    const status = t.cancel_requested && t.status === 'leased' ? 'leased,cancel-requested' : t.status;
    const error = t.last_error !== null && t.status !== 'succeeded' ? `  ${short(t.last_error, 100)}` : '';
    const line = [
      time(at),
      event.padEnd(8),
      t.id.padStart(6),
      short(t.queue, 20)!.padEnd(12),
      (short(t.concurrency_key, 20) ?? '-').padEnd(10),
      status.padEnd(10),
      `${t.attempts}/${t.max_attempts}`,
    ].join('  ');
    this.#c.out.event({ event, task: t }, `${line}${error}`);
  }
}
