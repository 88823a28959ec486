/** `sluice groups list | get | set | delete`: endpoint groups, URLs an enqueue naming the group fans out to (admin key). */
import type { GroupList, GroupView } from '../../protocol/wire-queues.ts';
import { intFlag, stringFlag } from '../args.ts';
import { type Command, seg } from '../context.ts';
import { UsageError } from '../errors.ts';
import { clean, table, time } from '../output.ts';

/** The API's largest page; `--limit` beyond it follows the cursor. */
const PAGE = 500;

const list: Command = {
  words: ['groups', 'list'],
  args: [],
  flags: [
    { name: 'limit', value: 'N', help: `how many, by name. Default: 100 (more than ${PAGE} takes several requests)` },
    { name: 'cursor', value: 'NAME', help: 'go on after this group (an earlier listing’s next_cursor)' },
  ],
  summary: 'list endpoint groups (admin)',
  details: 'Uses GET /v1/groups. When more remain, the cursor to go on with is printed on stderr (in the JSON: next_cursor).',
  async run({ api, out }, parsed) {
    const want = intFlag(parsed, 'limit', { min: 1, max: 100_000 }) ?? 100;
    const groups: GroupView[] = [];
    let cursor = stringFlag(parsed, 'cursor') ?? null;
    do {
      const query = new URLSearchParams({ limit: String(Math.min(PAGE, want - groups.length)) });
      if (cursor !== null) query.set('cursor', cursor);
      const page = await api.get<GroupList>(`/v1/groups?${query}`);
      groups.push(...page.groups);
      cursor = page.next_cursor;
    } while (cursor !== null && groups.length < want);
    out.result({ groups, next_cursor: cursor }, () =>
      groups.length
        ? table(
            ['NAME', 'URLS', 'FIRST URL', 'UPDATED'],
            groups.map((g) => [g.name, g.urls.length, g.urls[0] ?? null, time(g.updated_at)]),
          )
        : 'no groups',
    );
    if (cursor !== null) out.note(`more: --cursor ${cursor}`);
  },
};

function groupText(g: GroupView): string {
  return [`group ${clean(g.name)}: ${g.urls.length} URL${g.urls.length === 1 ? '' : 's'}`, ...g.urls.map((u) => `  ${clean(u)}`)].join(
    '\n',
  );
}

const get: Command = {
  words: ['groups', 'get'],
  args: [{ name: 'NAME' }],
  flags: [],
  summary: 'show an endpoint group and its URLs (admin)',
  details: 'Uses GET /v1/groups/NAME.',
  async run({ api, out }, { args }) {
    const group = await api.get<GroupView>(`/v1/groups/${seg(args.NAME!)}`);
    out.result(group, () => groupText(group));
  },
};

const set: Command = {
  words: ['groups', 'set'],
  args: [{ name: 'NAME' }],
  flags: [{ name: 'urls', value: "'URL URL …'", help: 'the URLs, separated by spaces or new lines (a URL holds none)', required: true }],
  summary: 'create an endpoint group or replace its URLs (admin)',
  details: [
    'Each URL is checked as a task’s url is. A task that names the group ("group": "NAME" instead of "url")',
    'then becomes one task per URL, all or none. Uses PUT /v1/groups/NAME.',
  ].join('\n'),
  async run({ api, out }, parsed) {
    const urls = (stringFlag(parsed, 'urls') ?? '').split(/\s+/).filter((u) => u !== '');
    if (urls.length === 0) throw new UsageError('--urls needs at least one URL');
    const group = await api.put<GroupView>(`/v1/groups/${seg(parsed.args.NAME!)}`, { urls });
    out.result(group, () => groupText(group));
  },
};

const remove: Command = {
  words: ['groups', 'delete'],
  args: [{ name: 'NAME' }],
  flags: [],
  summary: 'delete an endpoint group (admin)',
  details: 'The tasks it made are left alone. Uses DELETE /v1/groups/NAME (404 when there is none).',
  async run({ api, out }, { args }) {
    await api.delete(`/v1/groups/${seg(args.NAME!)}`);
    out.result({ name: args.NAME, deleted: true }, () => `group ${clean(args.NAME!)} deleted`);
  },
};

export const groupCommands: Command[] = [list, get, set, remove];
