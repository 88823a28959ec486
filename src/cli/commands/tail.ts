/**
 * `sluice tail`: follows tasks as they are enqueued, change state and finish, by polling the
 * list API with its cursor. The API has no change feed, and an index of update times would cost
 * every claim and settle a write, so tail composes what exists: the newest-first listing finds
 * new tasks, and the tasks it follows are re-read from the same pages (older ones one by one).
 */
import type { TaskDetail, TaskList, TaskStatus, TaskView } from '../../sdk/protocol/wire.ts';
import { Interrupted } from '../api.ts';
import { intFlag, stringFlag } from '../args.ts';
import type { Command, Context } from '../context.ts';
import { seg } from '../context.ts';
import { ApiError, type CliError, UnreachableError } from '../errors.ts';
import { short, time } from '../output.ts';

/** Unfinished tasks followed at once; beyond this the oldest are let go. */
const MAX_FOLLOWED = 1_000;
/** Followed tasks older than the pages just read, re-read one by one per poll. */
const MAX_SINGLE_READS = 50;
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
    'two polls is seen as one (a quick retry shows as a new attempt count). If Sluice stops answering',
    'after the first poll, tail says so on stderr and keeps trying; Ctrl-C ends it with exit code 0.',
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
  /** The newest task id seen; `null` before the first poll. */
  #newest: bigint | null = null;
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
        await sleep(Math.min(this.#o.intervalMs * 2 ** failures, 30_000), signal);
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
    const first = this.#newest === null;
    const rows: TaskView[] = [];
    let cursor: string | null = null;
    // Newest first, until a page reaches the newest task already seen (the first poll: one page).
    do {
      const limit = first ? Math.max(this.#o.lines, 1) : rows.length === 0 ? 100 : 500;
      const page: TaskList = await this.#c.api.get<TaskList>(`/v1/tasks?${this.#query(limit, cursor)}`);
      rows.push(...page.tasks);
      cursor = page.next_cursor;
    } while (!first && cursor !== null && BigInt(rows.at(-1)!.id) > this.#newest!);

    const newest = this.#newest;
    const fresh = rows.filter((t) => newest === null || BigInt(t.id) > newest).reverse();
    for (const t of first ? fresh.slice(fresh.length - this.#o.lines) : fresh) this.#arrived(t, first ? 'recent' : 'new');
    if (rows.length) this.#newest = BigInt(rows[0]!.id) > (newest ?? 0n) ? BigInt(rows[0]!.id) : newest;

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

  #query(limit: number, cursor: string | null): URLSearchParams {
    const q = new URLSearchParams({ limit: String(limit) });
    if (this.#o.queue !== undefined) q.set('queue', this.#o.queue);
    if (this.#o.key !== undefined) q.set('concurrency_key', this.#o.key);
    if (cursor !== null) q.set('cursor', cursor);
    return q;
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

/** What a later poll may survive: no answer, or the server's failure (the database down, say). */
function transient(error: unknown): error is CliError {
  return error instanceof UnreachableError || (error instanceof ApiError && (error.status >= 500 || error.status === 429));
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
