/**
 * The dashboard's actions. Each is confirmed first (a GET page saying what it will do and the
 * API call that does the same), then made by a POST that goes through the same code path as
 * that API call (queue-ops.ts, task-ops.ts): the same validation, the same writes, the same poke.
 */
import { NotFoundError, SluiceError, ValidationError } from '../../core/errors.ts';
import { endpointGet } from '../../db/endpoints.ts';
import { taskCountDead } from '../../db/tasks.ts';
import { originParam, pauseEndpoint, resumeEndpoint } from '../endpoint-ops.ts';
import {
  clearKeyLimit,
  concurrencyKey,
  leaseHolderOf,
  type OpsContext,
  patchQueue,
  queueName,
  releaseLease,
  resetQueue,
  setKeyLimit,
  setPaused,
} from '../queue-ops.ts';
import {
  cancelTask,
  REDRIVE_BATCH,
  REDRIVE_BATCHES_PER_CALL,
  REDRIVE_CAP,
  type RedriveReport,
  redriveMatching,
  redriveSelection,
  redriveTask,
  taskId,
} from '../task-ops.ts';
import { href } from './format.ts';

export type Params = Record<string, string>;

/** The API call an action makes, for the confirmation page's curl line. */
export interface ApiCall {
  method: 'POST' | 'PUT' | 'DELETE';
  path: string;
  body?: object;
}

export interface Described {
  title: string;
  detail: string;
  /** `null`: no single call does it (the page says what does). */
  call: ApiCall | null;
  /** Where the page goes back to, on cancel and after the action. */
  back: string;
  danger?: boolean;
}

/** What to tell the user once an action is done, and where to go then (`back` by default). */
export type Done = string | { text: string; next: string };

interface Action {
  fields: readonly string[];
  /** Checks the parameters (as the API would) and says what the action will do. */
  describe(p: Params, ops: OpsContext): Described | Promise<Described>;
  /** Does it; returns what to tell the user. */
  perform(ops: OpsContext, p: Params): Promise<Done>;
}

const seg = encodeURIComponent;
const queuePage = (q: string) => href(`/queues/${seg(q)}`);

/** A positive whole number from a form field, or a 400 naming the field. */
function count(p: Params, field: string): number {
  const text = (p[field] ?? '').trim();
  if (!/^\d{1,7}$/.test(text) || Number(text) < 1)
    throw new ValidationError([{ path: field, message: 'must be a whole number of at least 1' }]);
  return Number(text);
}

/** Where "redrive all" goes on from: the last task the previous confirmation examined. */
function afterParam(p: Params): string | null {
  if (!p.after) return null;
  if (taskId(p.after) === null) throw new ValidationError([{ path: 'after', message: 'is not a task id' }]);
  return p.after;
}

function taskIdParam(p: Params): string {
  const id = p.id ?? '';
  if (!/^[1-9]\d{0,18}$/.test(id)) throw new ValidationError([{ path: 'id', message: 'is not a task id' }]);
  return id;
}

/**
 * What a bulk redrive tells the user; when more remain, the next confirmation (`again`) goes on
 * after the last task it examined, past the tasks this one left dead.
 */
function redrove(report: RedriveReport, again: (lastId: string | null) => string): Done {
  const text = `Redrove ${report.redriven} dead task${report.redriven === 1 ? '' : 's'}${report.skipped ? `; ${report.skipped} stayed dead (their dedup key is taken)` : ''}${report.more ? `; more remain after task #${report.lastId}: confirm to go on` : ''}.`;
  return report.more ? { text, next: again(report.lastId) } : text;
}

/** The redrive form's fields as POST /v1/tasks/redrive's body: the non-empty ones, trimmed. */
const REDRIVE_FIELDS = ['queue', 'url_prefix', 'since', 'until', 'after'] as const;
function redriveBody(p: Params): Record<string, string> {
  const body: Record<string, string> = {};
  for (const f of REDRIVE_FIELDS) {
    const v = (p[f] ?? '').trim();
    if (v !== '') body[f] = v;
  }
  return body;
}

/** An origin's pause or resume by hand (admin), as POST /v1/endpoints/:origin/pause|resume does it. */
const endpointPauseOrResume = (paused: boolean): Action => ({
  fields: ['origin'],
  describe: async (p, ops) => {
    const origin = originParam(p.origin ?? '');
    const call: ApiCall = { method: 'POST', path: `/v1/endpoints/${seg(origin)}/${paused ? 'pause' : 'resume'}` };
    if (paused) {
      return {
        title: `Pause endpoint ${origin}`,
        detail:
          'None of its tasks is pushed until it is resumed, and no probe goes: they wait, using no attempt. Pushes already out finish.',
        call,
        back: href('/endpoints'),
        danger: true,
      };
    }
    // The page says what the resume ends, as the database has it now.
    const now = await endpointGet(ops.db, origin);
    if (!now) throw new NotFoundError(`endpoint ${origin}`);
    const held = now.heldUntil ? `held by a Retry-After until ${now.heldUntil.toISOString()}` : null;
    const state =
      now.state === 'healthy'
        ? (held ?? 'healthy')
        : `${now.state}${now.pausedBy === 'hand' ? ' (paused by hand)' : ` after ${now.consecutiveFailures} failures in a row`}${held ? `, and ${held}` : ''}`;
    return {
      title: `Resume endpoint ${origin}`,
      detail: `It is ${state}. Resumed, its waiting tasks are due at once, and its run of failures starts again from 0.`,
      call,
      back: href('/endpoints'),
    };
  },
  perform: async (ops, p) => {
    const e = await (paused ? pauseEndpoint : resumeEndpoint)(ops, p.origin ?? '');
    return paused ? `Endpoint ${e.origin} is paused by hand.` : `Endpoint ${e.origin} is ${e.state}: its waiting tasks are due now.`;
  },
});

const pauseOrResume = (paused: boolean): Action => ({
  fields: ['queue'],
  describe: (p) => {
    const q = queueName(p.queue ?? '');
    return {
      title: `${paused ? 'Pause' : 'Resume'} queue ${q}`,
      detail: paused
        ? 'Nothing more of it is claimed until it is resumed; tasks already leased run to the end of their lease.'
        : 'Its due tasks are claimed again at once.',
      call: { method: 'POST', path: `/v1/queues/${seg(q)}/${paused ? 'pause' : 'resume'}` },
      back: queuePage(q),
      danger: paused,
    };
  },
  perform: async (ops, p) => {
    await setPaused(ops, queueName(p.queue ?? ''), paused);
    return `Queue ${p.queue} is ${paused ? 'paused' : 'running'}.`;
  },
});

export const ACTIONS: Record<string, Action> = {
  release: {
    fields: ['queue', 'lease'],
    // The page names the lease's holder as the database has it now, not as the link said.
    describe: async (p, ops) => {
      const q = queueName(p.queue ?? '');
      const lease = p.lease ?? '';
      const holder = await leaseHolderOf(ops.db, q, lease);
      if (!holder) {
        throw new SluiceError(
          404,
          'not_found',
          `lease ${lease} is not held in queue ${q}: it has ended (its task may hold a new lease now), or it is another queue's`,
        );
      }
      const key = holder.concurrencyKey === null ? '' : `, key ${holder.concurrencyKey}`;
      return {
        title: `Force-release lease ${lease} of task #${holder.taskId}`,
        detail: `Task #${holder.taskId} (attempt ${holder.attempt}${key}) holds it until ${holder.expiresAt.toISOString()}. The slot is free at once: the task goes back to pending and its attempt is given back. The endpoint holding the lease may still be working; its later lease calls get 409 lease_lost.`,
        call: { method: 'POST', path: `/v1/queues/${seg(q)}/leases/${seg(p.lease ?? '')}/release` },
        back: queuePage(q),
        danger: true,
      };
    },
    perform: async (ops, p) => {
      const task = await releaseLease(ops, queueName(p.queue ?? ''), p.lease ?? '');
      return `Released lease ${p.lease} of task #${task}: it is pending again, its attempt given back.`;
    },
  },
  'key-limit': {
    fields: ['queue', 'key', 'limit'],
    describe: (p) => {
      const [q, key, limit] = [queueName(p.queue ?? ''), concurrencyKey(p.key ?? ''), count(p, 'limit')];
      return {
        title: `Set the limit of key ${key} in queue ${q} to ${limit}`,
        detail:
          'A run-time override: it wins over the limit the first task gave and the queue’s key_concurrency, from the next claim pass on. Tasks already leased above it finish.',
        call: { method: 'PUT', path: `/v1/queues/${seg(q)}/keys/${seg(key)}`, body: { limit } },
        back: queuePage(q),
      };
    },
    perform: async (ops, p) => {
      const { limit } = await setKeyLimit(ops, queueName(p.queue ?? ''), concurrencyKey(p.key ?? ''), { limit: count(p, 'limit') });
      return `Key ${p.key} of queue ${p.queue} is limited to ${limit}.`;
    },
  },
  'key-limit-clear': {
    fields: ['queue', 'key'],
    describe: (p) => {
      const [q, key] = [queueName(p.queue ?? ''), concurrencyKey(p.key ?? '')];
      return {
        title: `Remove the run-time limit of key ${key} in queue ${q}`,
        detail: 'The limit its first task gave, else the queue’s key_concurrency, applies again.',
        call: { method: 'DELETE', path: `/v1/queues/${seg(q)}/keys/${seg(key)}` },
        back: queuePage(q),
      };
    },
    perform: async (ops, p) => {
      await clearKeyLimit(ops, queueName(p.queue ?? ''), concurrencyKey(p.key ?? ''));
      return `Key ${p.key} of queue ${p.queue} has no run-time limit now.`;
    },
  },
  'queue-set': {
    fields: ['queue', 'field', 'value'],
    describe: (p) => {
      const q = queueName(p.queue ?? '');
      const field = p.field === 'key_concurrency' ? 'key_concurrency' : p.field === 'concurrency' ? 'concurrency' : null;
      if (!field) throw new ValidationError([{ path: 'field', message: 'must be concurrency or key_concurrency' }]);
      const value = (p.value ?? '').trim() === '' ? null : count(p, 'value');
      return {
        title: value === null ? `Remove the run-time ${field} of queue ${q}` : `Set the ${field} of queue ${q} to ${value}`,
        detail:
          value === null
            ? 'The value from SLUICE_QUEUES, if any, applies again from the next claim pass.'
            : 'A run-time override: it wins over SLUICE_QUEUES from the next claim pass on. Tasks already leased above it finish.',
        call: { method: 'PUT', path: `/v1/queues/${seg(q)}`, body: { [field]: value } },
        back: queuePage(q),
      };
    },
    perform: async (ops, p) => {
      const { call } = await ACTIONS['queue-set']!.describe(p, ops);
      const view = await patchQueue(ops, queueName(p.queue ?? ''), call?.body);
      return `Queue ${view.name}: concurrency ${view.concurrency.value ?? 'none'} (${view.concurrency.source}), key concurrency ${view.key_concurrency.value ?? 'none'} (${view.key_concurrency.source}).`;
    },
  },
  'key-strategy': {
    fields: ['queue', 'value'],
    describe: (p) => {
      const q = queueName(p.queue ?? '');
      const value = (p.value ?? '').trim() === '' ? null : (p.value ?? '');
      const meaning: Record<string, string> = {
        queue: 'A new task of a busy key waits its turn behind the key’s unfinished tasks.',
        cancel_in_progress:
          'A new task of a key cancels the key’s unfinished tasks; a leased one ends at once, its slot free and its push’s answer ignored.',
        cancel_newest: 'An enqueue for a key with an unfinished task makes nothing; it answers that task, marked skipped.',
        replace_pending: 'A new task of a key cancels the key’s pending tasks; a running one keeps running.',
      };
      return {
        title: value === null ? `Remove the run-time key strategy of queue ${q}` : `Set the key strategy of queue ${q} to ${value}`,
        detail: `${value === null ? 'The value from SLUICE_QUEUES, else queue, applies again.' : (meaning[value] ?? '')} From the next enqueue on; tasks already enqueued are left as they are.`,
        call: { method: 'PUT', path: `/v1/queues/${seg(q)}`, body: { key_strategy: value } },
        back: queuePage(q),
        danger: value === 'cancel_in_progress',
      };
    },
    perform: async (ops, p) => {
      const { call } = await ACTIONS['key-strategy']!.describe(p, ops);
      const view = await patchQueue(ops, queueName(p.queue ?? ''), call?.body);
      return `Queue ${view.name}: key strategy ${view.key_strategy.value} (${view.key_strategy.source}).`;
    },
  },
  'queue-reset': {
    fields: ['queue'],
    describe: (p) => {
      const q = queueName(p.queue ?? '');
      return {
        title: `Remove every run-time override of queue ${q}`,
        detail: 'Its concurrency, key concurrency, priority and paused state come from SLUICE_QUEUES again (key limits stay).',
        call: { method: 'DELETE', path: `/v1/queues/${seg(q)}` },
        back: queuePage(q),
      };
    },
    perform: async (ops, p) => {
      await resetQueue(ops, queueName(p.queue ?? ''));
      return `Queue ${p.queue} has no run-time override now.`;
    },
  },
  pause: pauseOrResume(true),
  resume: pauseOrResume(false),
  redrive: {
    fields: ['id'],
    describe: (p) => {
      const id = taskIdParam(p);
      return {
        title: `Redrive dead task #${id}`,
        detail: 'Once confirmed, it is pending again, with a fresh attempt budget; its history stays.',
        call: { method: 'POST', path: `/v1/tasks/${id}/retry` },
        back: href(`/tasks/${id}`),
      };
    },
    perform: async (ops, p) => {
      const task = await redriveTask(ops, taskIdParam(p));
      return `Task #${task.id} is ${task.status} again, with a fresh attempt budget.`;
    },
  },
  cancel: {
    fields: ['id'],
    describe: (p) => {
      const id = taskIdParam(p);
      return {
        title: `Cancel task #${id}`,
        detail:
          'A pending or waiting task ends now. A leased one is marked: it ends at its holder’s next heartbeat or failure, and keeps its slot until then. Its unfinished children (the tasks that name it as parent_id, theirs, and so on) are cancelled with it, each in the same way.',
        call: { method: 'POST', path: `/v1/tasks/${id}/cancel` },
        back: href(`/tasks/${id}`),
        danger: true,
      };
    },
    perform: async (ops, p) => {
      const task = await cancelTask(ops, taskIdParam(p));
      return task.status === 'cancelled' ? `Task #${task.id} is cancelled.` : `Task #${task.id} is leased: its cancellation is requested.`;
    },
  },
  'endpoint-pause': endpointPauseOrResume(true),
  'endpoint-resume': endpointPauseOrResume(false),
  // Replay: POST /v1/tasks/redrive. Its confirmation is the dry run: it counts what matches first.
  'redrive-matching': {
    fields: REDRIVE_FIELDS,
    describe: async (p, ops) => {
      const body = redriveBody(p);
      const { filter, after } = redriveSelection(body, null);
      const matched = await taskCountDead(ops.db, filter, REDRIVE_CAP);
      const which = [
        filter.queue === undefined ? 'of every queue' : `of queue ${filter.queue}`,
        filter.urlPrefix === undefined ? '' : `whose URL starts with ${filter.urlPrefix}`,
        filter.since === undefined ? '' : `dead since ${filter.since.toISOString()}`,
        filter.until === undefined ? '' : `dead before ${filter.until.toISOString()}`,
        after === null ? '' : `after task #${after}`,
      ].filter((w) => w !== '');
      const count = matched >= REDRIVE_CAP ? `${REDRIVE_CAP}+` : String(matched);
      return {
        title: `Redrive ${count} dead task${matched === 1 ? '' : 's'} that match`,
        detail: `Dead tasks ${which.join(', ')}: ${count} match now (counted, nothing redriven yet). Once confirmed, they are pending again with a fresh attempt budget, oldest first, at most ${REDRIVE_CAP} per confirmation (when more remain, the next confirmation goes on after the last one examined). A dead task whose dedup key an unfinished task holds stays dead.`,
        call: { method: 'POST', path: '/v1/tasks/redrive', body },
        back: href('/endpoints'),
        danger: true,
      };
    },
    perform: async (ops, p) => {
      const { filter, after } = redriveSelection(redriveBody(p), null);
      const report = await redriveMatching(ops, filter, after);
      return redrove(report, (lastId) => href('/confirm/redrive-matching', { ...redriveBody(p), after: lastId }));
    },
  },
  'redrive-all': {
    fields: ['queue', 'concurrency_key', 'after'],
    describe: (p) => {
      const q = p.queue ? queueName(p.queue) : undefined;
      const key = p.concurrency_key ? concurrencyKey(p.concurrency_key) : undefined;
      const after = afterParam(p);
      return {
        title: `Redrive every dead task${q ? ` of queue ${q}` : ''}${key !== undefined ? ` with key ${key}` : ''}${after ? ` after task #${after}` : ''}`,
        detail: `Oldest first${after ? `, from the first after task #${after}, where the last confirmation stopped` : ''}; ${REDRIVE_BATCH} per statement, at most ${REDRIVE_BATCH * REDRIVE_BATCHES_PER_CALL} examined per confirmation (when more remain, the next confirmation goes on after the last one examined). A dead task whose dedup key an unfinished task holds stays dead.`,
        call: null,
        back: href('/dead', { queue: q, concurrency_key: key }),
        danger: true,
      };
    },
    perform: async (ops, p) => {
      const filter = {
        queue: p.queue ? queueName(p.queue) : undefined,
        concurrencyKey: p.concurrency_key ? concurrencyKey(p.concurrency_key) : undefined,
      };
      const report = await redriveMatching(ops, filter, afterParam(p));
      return redrove(report, (lastId) =>
        href('/confirm/redrive-all', { queue: p.queue, concurrency_key: p.concurrency_key, after: lastId }),
      );
    },
  },
};
