/** `sluice keys set | clear`: the run-time limit of one concurrency key (admin key). */
import { intFlag } from '../args.ts';
import { type Command, seg } from '../context.ts';
import { UsageError } from '../errors.ts';

/**
 * The path of a key's limit. Some keys cannot be named in it: the empty key (what `key_from`
 * gives a task without the field) has no path segment, and "." and ".." are folders to a URL.
 */
function keyPath(queue: string, key: string): string {
  if (key === '') {
    throw new UsageError("the empty key cannot be named in the API's path: set the queue's --key-concurrency instead");
  }
  if (key === '.' || key === '..') {
    throw new UsageError(
      `the key ${JSON.stringify(key)} cannot be named in the API's path, where it names a folder (encoded too): its limit comes from its first task's concurrency_limit, else the queue's --key-concurrency`,
    );
  }
  return `/v1/queues/${seg(queue)}/keys/${seg(key)}`;
}

const set: Command = {
  words: ['keys', 'set'],
  args: [{ name: 'QUEUE' }, { name: 'KEY' }],
  flags: [{ name: 'limit', value: 'N', help: 'leased tasks the key may hold at once', required: true }],
  summary: 'set the limit of one concurrency key (admin)',
  details: [
    "The key's run-time limit wins over the limit its first task gave and the queue's key concurrency.",
    'It takes effect at the next claim pass. Uses PUT /v1/queues/QUEUE/keys/KEY.',
  ].join('\n'),
  async run({ api, out }, parsed) {
    const { QUEUE, KEY } = parsed.args as { QUEUE: string; KEY: string };
    const limit = intFlag(parsed, 'limit');
    const answer = await api.put<{ queue: string; key: string; limit: number; source: string }>(keyPath(QUEUE, KEY), { limit });
    out.result(answer, () => `key ${answer.key} of queue ${answer.queue}: limit ${answer.limit} (${answer.source})`);
  },
};

const clear: Command = {
  words: ['keys', 'clear'],
  args: [{ name: 'QUEUE' }, { name: 'KEY' }],
  flags: [],
  summary: 'drop the run-time limit of one key (admin)',
  details: [
    "The limit the key's first task gave, else the queue's key concurrency, applies again.",
    'Uses DELETE /v1/queues/QUEUE/keys/KEY (404 when the key has no run-time limit).',
  ].join('\n'),
  async run({ api, out }, { args }) {
    const { QUEUE, KEY } = args as { QUEUE: string; KEY: string };
    await api.delete(keyPath(QUEUE, KEY));
    out.result({ queue: QUEUE, key: KEY, cleared: true }, () => `key ${KEY} of queue ${QUEUE}: run-time limit dropped`);
  },
};

export const keyCommands: Command[] = [set, clear];
