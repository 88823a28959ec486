/**
 * `sluice endpoints [pause | resume ORIGIN]`: the origins Sluice pushes to and their health; and
 * `sluice tasks replay`: redrive the dead tasks that match (POST /v1/tasks/redrive).
 */
import type { RedriveRequest, RedriveResult } from '../../protocol/wire.ts';
import type { EndpointView } from '../../protocol/wire-queues.ts';
import { stringFlag } from '../args.ts';
import { type Command, seg } from '../context.ts';
import { clean, table, time } from '../output.ts';

const list: Command = {
  words: ['endpoints'],
  args: [],
  flags: [],
  summary: 'list endpoint origins and their health: paused, probing, failures in a row, the last five minutes',
  details:
    'Uses GET /v1/endpoints. An origin that fails SLUICE_ENDPOINT_PAUSE_AFTER times in a row is paused: its tasks wait, using no attempt, and one probe goes after a backoff; a 2xx resumes it.',
  async run({ api, out }) {
    const { endpoints } = await api.get<{ endpoints: EndpointView[] }>('/v1/endpoints');
    out.result({ endpoints }, () =>
      endpoints.length
        ? table(
            ['ORIGIN', 'STATE', 'FAILURES IN A ROW', 'ATTEMPTS 5M', 'FAILURES 5M', 'UNTIL', 'LAST ERROR'],
            endpoints.map((e) => [
              e.origin,
              e.state === 'paused' && e.paused_by === 'hand' ? 'paused by hand' : e.state,
              e.consecutive_failures,
              e.attempts_5m,
              e.failures_5m,
              (e.paused_until ?? e.held_until) ? time(e.paused_until ?? e.held_until) : null,
              e.last_error === null ? null : clean(e.last_error),
            ]),
          )
        : 'no endpoints pushed to lately',
    );
  },
};

const byHand = (action: 'pause' | 'resume'): Command => ({
  words: ['endpoints', action],
  args: [{ name: 'ORIGIN' }],
  flags: [],
  summary:
    action === 'pause'
      ? 'pause an origin by hand: its tasks wait, using no attempt, with no probe until a resume (admin)'
      : 'resume an origin: its waiting tasks are due now (admin)',
  details: `ORIGIN is scheme, host and port, such as https://example.com. Uses POST /v1/endpoints/ORIGIN/${action}.`,
  async run({ api, out }, { args }) {
    const e = await api.post<EndpointView>(`/v1/endpoints/${seg(args.ORIGIN!)}/${action}`);
    out.result(e, () => `${e.origin}: ${e.state}${e.paused_by === 'hand' ? ' (by hand)' : ''}`);
  },
});

const replay: Command = {
  words: ['tasks', 'replay'],
  args: [],
  flags: [
    { name: 'queue', value: 'QUEUE', help: 'only dead tasks of this queue' },
    { name: 'url-prefix', value: 'PREFIX', help: 'only dead tasks whose URL starts with this, such as an origin' },
    { name: 'since', value: 'TIME', help: 'only tasks that went dead at or after this ISO 8601 time' },
    { name: 'until', value: 'TIME', help: 'only tasks that went dead before this ISO 8601 time' },
    { name: 'dry-run', help: 'count the matching dead tasks, redrive none' },
  ],
  summary: 'redrive the dead tasks that match (queue, URL prefix, when they died)',
  details: 'Uses POST /v1/tasks/redrive, again with `after` while it answers `more`.',
  async run({ api, out }, parsed) {
    const body: RedriveRequest = {};
    const queue = stringFlag(parsed, 'queue');
    const prefix = stringFlag(parsed, 'url-prefix');
    const since = stringFlag(parsed, 'since');
    const until = stringFlag(parsed, 'until');
    if (queue !== undefined) body.queue = queue;
    if (prefix !== undefined) body.url_prefix = prefix;
    if (since !== undefined) body.since = since;
    if (until !== undefined) body.until = until;
    if (parsed.flags.has('dry-run')) body.dry_run = true;
    const total = { matched: 0, redriven: 0, skipped: 0 };
    let step: RedriveResult;
    do {
      step = await api.post<RedriveResult>('/v1/tasks/redrive', body);
      total.matched += step.matched;
      total.redriven += step.redriven;
      total.skipped += step.skipped;
      if (step.last_id !== null) body.after = step.last_id;
    } while (step.more && !step.dry_run);
    out.result({ ...total, dry_run: step.dry_run }, () =>
      step.dry_run
        ? `${total.matched}${step.more ? ' or more' : ''} dead task${total.matched === 1 ? '' : 's'} match`
        : `redrove ${total.redriven} dead task${total.redriven === 1 ? '' : 's'}${total.skipped ? `; ${total.skipped} stayed dead (their dedup key is taken)` : ''}`,
    );
  },
};

export const endpointCommands: readonly Command[] = [list, byHand('pause'), byHand('resume'), replay];
