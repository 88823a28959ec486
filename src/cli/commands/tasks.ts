/** `sluice tasks list | get | retry | cancel | enqueue`. */
import type { EnqueuedTask, EnqueueRequest, TaskDetail, TaskList, TaskView } from '../../protocol/wire.ts';
import { intFlag, type Parsed, stringFlag } from '../args.ts';
import { type Command, seg } from '../context.ts';
import { UsageError } from '../errors.ts';
import { clean, short, span, table, time } from '../output.ts';

/** The API's largest page; `--limit` beyond it follows the cursor. */
const PAGE = 500;

const list: Command = {
  words: ['tasks', 'list'],
  args: [],
  flags: [
    { name: 'queue', value: 'QUEUE', help: 'only this queue' },
    { name: 'status', value: 'STATUS', help: 'only this status: pending, leased, succeeded, dead, cancelled or expired' },
    { name: 'key', value: 'KEY', help: 'only this concurrency key' },
    { name: 'limit', value: 'N', help: `how many, newest first. Default: 50 (more than ${PAGE} takes several requests)` },
    { name: 'cursor', value: 'CURSOR', help: 'go on from where an earlier listing stopped (its next_cursor)' },
  ],
  summary: 'list tasks, newest first',
  details: 'Uses GET /v1/tasks. When more remain, the cursor to go on with is printed on stderr (in the JSON: next_cursor).',
  async run({ api, out }, parsed) {
    const want = intFlag(parsed, 'limit', { min: 1, max: 100_000 }) ?? 50;
    const filter = new URLSearchParams();
    for (const [flag, param] of [
      ['queue', 'queue'],
      ['status', 'status'],
      ['key', 'concurrency_key'],
    ] as const) {
      const value = stringFlag(parsed, flag);
      if (value !== undefined) filter.set(param, value);
    }
    const tasks: TaskView[] = [];
    let cursor = stringFlag(parsed, 'cursor') ?? null;
    do {
      const query = new URLSearchParams(filter);
      query.set('limit', String(Math.min(PAGE, want - tasks.length)));
      if (cursor !== null) query.set('cursor', cursor);
      const page = await api.get<TaskList>(`/v1/tasks?${query}`);
      tasks.push(...page.tasks);
      cursor = page.next_cursor;
    } while (cursor !== null && tasks.length < want);
    out.result({ tasks, next_cursor: cursor }, () => (tasks.length ? tasksTable(tasks) : 'no tasks'));
    if (cursor !== null) out.note(`more: --cursor ${cursor}`);
  },
};

function tasksTable(tasks: TaskView[]): string {
  return table(
    ['ID', 'QUEUE', 'STATUS', 'KEY', 'ATTEMPTS', 'RUN AT', 'UPDATED', 'LAST ERROR'],
    tasks.map((t) => [
      t.id,
      t.queue,
      t.cancel_requested && t.status === 'leased' ? 'leased (cancel requested)' : t.status,
      t.concurrency_key,
      `${t.attempts}/${t.max_attempts}`,
      time(t.run_at),
      time(t.updated_at),
      short(t.last_error, 60),
    ]),
  );
}

const get: Command = {
  words: ['tasks', 'get'],
  args: [{ name: 'ID' }],
  flags: [],
  summary: 'one task, with its body and every attempt',
  details:
    'Its settings, body, header names, result and every attempt. Uses GET /v1/tasks/ID. Header values are never shown (they may be credentials), only their names.',
  async run({ api, out }, { args }) {
    const task = await api.get<TaskDetail>(`/v1/tasks/${seg(args.ID!)}`);
    out.result(task, () => taskReport(task));
  },
};

function taskReport(t: TaskDetail): string {
  const body = t.body !== undefined ? JSON.stringify(t.body) : (t.body_text ?? null);
  const rows: Array<[string, string | number | null]> = [
    ['queue', t.queue],
    ['status', t.status + (t.cancel_requested ? ' (cancel requested)' : '')],
    ['url', t.url === null ? 'none (a pull queue’s task)' : `${t.method} ${t.url}`],
    [
      'key',
      t.concurrency_key === null ? null : `${t.concurrency_key}${t.concurrency_limit === null ? '' : ` (limit ${t.concurrency_limit})`}`,
    ],
    ['priority', t.priority],
    ['attempts', `${t.attempts} of ${t.max_attempts}`],
    ['run at', time(t.run_at)],
    ['expires at', t.expires_at && time(t.expires_at)],
    ['lease', t.lease && `${t.lease.id}, expires ${time(t.lease.expires_at)}`],
    ['timeout / lease', `${span(t.timeout_ms)} / ${span(t.lease_ms)}`],
    [
      'dedup key',
      t.dedup_key && (t.dedup_ttl_ms === null ? t.dedup_key : `${t.dedup_key} (kept ${span(t.dedup_ttl_ms)} after it finishes)`),
    ],
    ['created', time(t.created_at)],
    ['finished', t.finished_at && time(t.finished_at)],
    ['headers', t.header_names.join(', ') || null],
    ['body', short(body, 400) && `${t.content_type}: ${short(body, 400)}`],
    ['result', short(t.result, 400)],
    ['last error', short(t.last_error, 400)],
  ];
  const attempts = t.attempt_history.map((a) => [
    a.attempt,
    a.outcome,
    a.http_status,
    a.duration_ms === null ? null : span(a.duration_ms),
    time(a.started_at),
    short(a.error, 80),
  ]);
  return [
    `task ${t.id}`,
    table(['FIELD', 'VALUE'], rows),
    '',
    attempts.length ? table(['ATTEMPT', 'OUTCOME', 'HTTP', 'TOOK', 'STARTED', 'ERROR'], attempts) : 'no attempts yet',
  ].join('\n');
}

/** A task's state in one line: what `retry`, `cancel` and `enqueue` print. */
function stateLine(t: Pick<TaskView, 'id' | 'queue' | 'status'> & Partial<TaskView>): string {
  const more = t.cancel_requested && t.status === 'leased' ? ': cancel requested, it ends when its holder next reports' : '';
  return `task ${t.id} (queue ${clean(t.queue)}): ${t.status}${more}`;
}

const retry: Command = {
  words: ['tasks', 'retry'],
  args: [{ name: 'ID' }],
  flags: [],
  summary: 'redrive a dead task',
  details: 'With a fresh attempt budget; a task that is not dead answers 409 not_dead. Uses POST /v1/tasks/ID/retry.',
  async run({ api, out }, { args }) {
    const task = await api.post<TaskView>(`/v1/tasks/${seg(args.ID!)}/retry`);
    out.result(task, () => stateLine(task));
  },
};

const cancel: Command = {
  words: ['tasks', 'cancel'],
  args: [{ name: 'ID' }],
  flags: [],
  summary: 'cancel a task',
  details:
    "A pending task ends now; a leased one is marked, and ends at its holder's next heartbeat or failure.\nUses POST /v1/tasks/ID/cancel; a finished task answers 409 already_finished.",
  async run({ api, out }, { args }) {
    const task = await api.post<TaskView>(`/v1/tasks/${seg(args.ID!)}/cancel`);
    out.result(task, () => stateLine(task));
  },
};

const enqueue: Command = {
  words: ['tasks', 'enqueue'],
  args: [],
  flags: [
    {
      name: 'endpoint',
      value: 'URL',
      help: "the endpoint to push the task to (the request's url). Default: the queue's url; none for a pull queue",
    },
    { name: 'group', value: 'NAME', help: 'instead of --endpoint: one task per URL of this endpoint group (see `sluice groups`)' },
    { name: 'queue', value: 'QUEUE', help: 'Default: default' },
    { name: 'body', value: 'JSON', help: 'the body, a JSON value (sent as application/json)' },
    { name: 'key', value: 'KEY', help: 'the concurrency key' },
    { name: 'key-limit', value: 'N', help: "the key's limit, when none is configured yet" },
    { name: 'delay', value: 'MS', help: 'not before MS milliseconds from now' },
    { name: 'priority', value: 'N', help: 'lower runs first. Default: 0' },
    { name: 'max-attempts', value: 'N', help: "Default: the queue's, else 5" },
    { name: 'dedup-key', value: 'KEY', help: 'while a task with this key is unfinished in the queue, return it instead' },
    { name: 'dedup-ttl', value: 'MS', help: 'with --dedup-key: and for MS milliseconds after it finished' },
    { name: 'data', value: 'JSON', help: 'the whole request as JSON (any field of POST /v1/tasks); the flags above override it' },
  ],
  summary: 'enqueue one task',
  details:
    'Uses POST /v1/tasks; prints the task (201), or the one with the same dedup key (200): unfinished, or finished within its --dedup-ttl.',
  async run({ api, out }, parsed) {
    const data = parsed.flags.has('data') ? jsonFlag(parsed, 'data') : {};
    if (data === null || typeof data !== 'object' || Array.isArray(data)) throw new UsageError('--data must be a JSON object');
    const request = { ...data, ...enqueueFields(parsed) } as EnqueueRequest;
    const task = await api.post<EnqueuedTask | { tasks: EnqueuedTask[] }>('/v1/tasks', request);
    // A group's task is one per URL of the group.
    if ('tasks' in task) return out.result(task, () => task.tasks.map((t) => `enqueued ${stateLine(t)}`).join('\n'));
    out.result(task, () => (task.deduplicated ? `deduplicated: ${stateLine(task)}` : `enqueued ${stateLine(task)}`));
  },
};

function enqueueFields(parsed: Parsed): Record<string, unknown> {
  const fields: Record<string, unknown> = {
    url: stringFlag(parsed, 'endpoint'),
    group: stringFlag(parsed, 'group'),
    queue: stringFlag(parsed, 'queue'),
    concurrency_key: stringFlag(parsed, 'key'),
    concurrency_limit: intFlag(parsed, 'key-limit'),
    delay_ms: intFlag(parsed, 'delay'),
    priority: intFlag(parsed, 'priority'),
    max_attempts: intFlag(parsed, 'max-attempts'),
    dedup_key: stringFlag(parsed, 'dedup-key'),
    dedup_ttl_ms: intFlag(parsed, 'dedup-ttl'),
  };
  if (parsed.flags.has('body')) fields.body = jsonFlag(parsed, 'body');
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));
}

function jsonFlag(parsed: Parsed, name: string): unknown {
  try {
    return JSON.parse(stringFlag(parsed, name) ?? '');
  } catch {
    throw new UsageError(`--${name} must be JSON, e.g. --${name} '{"order":42}'`);
  }
}

export const taskCommands: Command[] = [list, get, retry, cancel, enqueue];
