/** `sluice queues set | reset | pause | resume`: run-time overrides of a queue (admin key). */
import type { KeyStrategy, QueueSettingsPatch, QueueView } from '../../protocol/wire-queues.ts';
import { type FlagSpec, intFlag, type Parsed } from '../args.ts';
import { type Command, seg } from '../context.ts';
import { UsageError } from '../errors.ts';
import { parseRate } from '../rates.ts';
import { queueReport } from './status.ts';

const SETTINGS = [
  ['concurrency', 'concurrency', 'leased tasks the queue may hold at once'],
  ['key-concurrency', 'key_concurrency', 'leased tasks each key of the queue may hold (keys without a limit of their own)'],
  ['priority', 'priority', 'order between queues: lower is claimed first'],
  ['adaptive-min', 'adaptive_min', 'the lowest limit an adaptive queue learns (default 1)'],
] as const;

const RATES = [
  [
    'rate',
    'rate',
    'pushes the queue may start in any window of PERIOD (10/1s, 100/1m, 5/250ms); +B for a burst: up to B at once, refilling at N per PERIOD (10/1s+50)',
  ],
  ['key-rate', 'key_rate', 'the same for each key of the queue (keys without a rate of their own)'],
] as const;

const SWITCHES = [
  [
    'adaptive',
    'adaptive',
    "limits that learn from the endpoint (AIMD): the queue's and its keys' limits become ceilings, lowered on 429/503, raised after successes",
  ],
  ['pull', 'pull', 'consumed by pulling (`sluice listen`, POST /v1/queues/QUEUE/lease), not pushed; its tasks need no url'],
] as const;

const KEY_STRATEGIES: readonly KeyStrategy[] = ['queue', 'cancel_in_progress', 'cancel_newest', 'replace_pending'];

const CHOICES = [
  [
    'key-strategy',
    'key_strategy',
    KEY_STRATEGIES,
    'what an enqueue does to a concurrency key with unfinished tasks: queue (wait behind them), cancel_in_progress (cancel them, a leased one at once), cancel_newest (make nothing, answer that task), replace_pending (cancel the pending ones)',
  ],
] as const;

/** The queue settings `queues set` takes, by field: every one of core/queue-settings.ts (a test holds them together). */
export const SETTING_FIELDS: readonly string[] = [...SETTINGS, ...RATES, ...SWITCHES, ...CHOICES].map(([, field]) => field);

const settingFlags: FlagSpec[] = [
  ...SETTINGS.map(([flag, , help]) => ({ name: flag, value: 'N|unset', help: `${help}; \`unset\` drops the override` })),
  ...RATES.map(([flag, , help]) => ({ name: flag, value: 'N/PERIOD|unset', help: `${help}; \`unset\` drops the override` })),
  ...SWITCHES.map(([flag, , help]) => ({ name: flag, value: 'true|false|unset', help: `${help}; \`unset\` drops the override` })),
  ...CHOICES.map(([flag, , values, help]) => ({
    name: flag,
    value: `${values.join('|')}|unset`,
    help: `${help}; \`unset\` drops the override`,
  })),
];

/** The PUT body: a value sets a field, `unset` sends null (drops that override), others stay as they are. */
function patchFrom(parsed: Parsed): QueueSettingsPatch {
  const patch: Record<string, unknown> = {};
  for (const [flag, field] of [...SETTINGS, ...RATES]) {
    const value = parsed.flags.get(flag);
    if (value === undefined) continue;
    if (value === 'unset') patch[field] = null;
    else patch[field] = RATES.some(([f]) => f === flag) ? parseRate(flag, String(value)) : intFlag(parsed, flag);
  }
  for (const [flag, field] of SWITCHES) {
    const value = parsed.flags.get(flag);
    if (value === undefined) continue;
    if (value === 'unset') patch[field] = null;
    else if (value === 'true' || value === 'false') patch[field] = value === 'true';
    else throw new UsageError(`--${flag} takes true, false or unset, not ${JSON.stringify(value)}`);
  }
  for (const [flag, field, values] of CHOICES) {
    const value = parsed.flags.get(flag);
    if (value === undefined) continue;
    if (value === 'unset') patch[field] = null;
    else if ((values as readonly unknown[]).includes(value)) patch[field] = value;
    else throw new UsageError(`--${flag} takes ${values.join(', ')} or unset, not ${JSON.stringify(value)}`);
  }
  if (Object.keys(patch).length === 0) {
    throw new UsageError(`nothing to set: give at least one of ${settingFlags.map((f) => `--${f.name}`).join(', ')}`);
  }
  return patch as QueueSettingsPatch;
}

const set: Command = {
  words: ['queues', 'set'],
  args: [{ name: 'QUEUE' }],
  flags: settingFlags,
  summary: "override a queue's limits at run time (admin)",
  details: [
    'Overrides win over SLUICE_QUEUES until unset (one) or reset (all).',
    'A lowered limit takes effect at the next claim pass; tasks already leased above it finish.',
    '`--concurrency unset` drops that one override (the value from SLUICE_QUEUES, else none, applies again).',
    'Uses PUT /v1/queues/QUEUE; prints the queue as it is now.',
  ].join('\n'),
  async run({ api, out }, parsed) {
    const patch = patchFrom(parsed);
    const queue = await api.put<QueueView>(`/v1/queues/${seg(parsed.args.QUEUE!)}`, patch);
    out.result(queue, () => queueReport(queue));
  },
};

const reset: Command = {
  words: ['queues', 'reset'],
  args: [{ name: 'QUEUE' }],
  flags: [],
  summary: 'drop every run-time override of a queue (admin)',
  details: [
    "Pause included: SLUICE_QUEUES's values apply again.",
    'Uses DELETE /v1/queues/QUEUE (404 when the queue has no override).',
  ].join('\n'),
  async run({ api, out }, { args }) {
    const queue = await api.delete<QueueView>(`/v1/queues/${seg(args.QUEUE!)}`);
    out.result(queue, () => queueReport(queue));
  },
};

const pauseOrResume = (action: 'pause' | 'resume', summary: string, effect: string): Command => ({
  words: ['queues', action],
  args: [{ name: 'QUEUE' }],
  flags: [],
  summary,
  details: `${effect} Uses POST /v1/queues/QUEUE/${action}.`,
  async run({ api, out }, { args }) {
    const queue = await api.post<QueueView>(`/v1/queues/${seg(args.QUEUE!)}/${action}`);
    out.result(queue, () => queueReport(queue));
  },
});

export const queueCommands: Command[] = [
  set,
  reset,
  pauseOrResume('pause', 'stop claiming from a queue (admin)', 'Nothing more is claimed from it; leased tasks finish.'),
  pauseOrResume('resume', 'claim from a paused queue again (admin)', 'Claiming starts again at once.'),
];
