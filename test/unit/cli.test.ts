/** The CLI's pure parts: its argument parser, terminal-safe text, and the succeeded counts it reads from /metrics. */
import { describe, expect, it } from 'vitest';
import type { Api } from '../../src/cli/api.ts';
import { type CommandSpec, intFlag, parseTokens } from '../../src/cli/args.ts';
import { ApiError, UnreachableError, UsageError } from '../../src/cli/errors.ts';
import { clean, describeProblem, span, table } from '../../src/cli/output.ts';
import { parseRate, rateText } from '../../src/cli/rates.ts';
import { parseSucceeded, readSucceeded } from '../../src/cli/succeeded.ts';

const command: CommandSpec<unknown> = {
  words: ['queues', 'set'],
  args: [{ name: 'QUEUE' }],
  flags: [
    { name: 'priority', value: 'N', help: '' },
    { name: 'force', help: '' },
  ],
  summary: '',
  run: async () => {},
};

describe('the argument parser', () => {
  it('takes --flag value, --flag=value, a value that begins with "-", switches, and anything after --', () => {
    const parsed = parseTokens(command, ['queues', 'set', '--priority', '-5', '--json', '--url=http://x', '--', '-odd-name']);
    expect(parsed.args).toEqual({ QUEUE: '-odd-name' });
    expect(Object.fromEntries(parsed.flags)).toEqual({ priority: '-5', json: true, url: 'http://x' });
    expect(intFlag(parsed, 'priority')).toBe(-5);
  });

  it('refuses what the command does not declare, naming it', () => {
    const refusal = (tokens: string[]) => {
      try {
        parseTokens(command, tokens);
      } catch (error) {
        expect(error).toBeInstanceOf(UsageError);
        return (error as Error).message;
      }
      throw new Error(`${tokens.join(' ')} was accepted`);
    };
    expect(refusal(['queues', 'set', 'q', '--limit', '3'])).toMatch(/^unknown option --limit for `sluice queues set`/);
    expect(refusal(['queues', 'set', 'q', '--priority'])).toBe('--priority needs a value: --priority N');
    expect(refusal(['queues', 'set', 'q', '--force=yes'])).toBe('--force takes no value');
    expect(refusal(['queues', 'set'])).toBe('missing QUEUE: sluice queues set QUEUE [options]');
    expect(refusal(['queues', 'set', 'q', 'r'])).toMatch(/^unexpected argument "r"/);
    expect(() => intFlag(parseTokens(command, ['queues', 'set', 'q', '--priority', '1.5']), 'priority')).toThrow(/whole number/);
  });
});

describe('text for a terminal', () => {
  it('escapes control characters, C1 ones included, so task data cannot drive the terminal', () => {
    expect(clean('ok\u001b[2J\u009b31m\r\nnext\u007f')).toBe('ok\\u001b[2J\\u009b31m\\r\\nnext\\u007f');
    expect(table(['A', 'N'], [['x\ty', 7]])).toBe('A     N\nx\\ty  7');
  });

  it('escapes bidi overrides and invisible formatting, so text shows as it is, not as it poses', () => {
    // "exe.txt" that is really "txt.exe"; an isolate; marks; a zero-width space; a BOM; a line
    // separator; a tag character (astral).
    expect(clean('a\u202etxt.exe')).toBe('a\\u202etxt.exe');
    expect(clean('\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u200e\u200f')).toBe(
      '\\u202a\\u202b\\u202c\\u202d\\u2066\\u2067\\u2068\\u2069\\u200e\\u200f',
    );
    expect(clean('k\u200bey\ufeff\u2028\u{e0041}')).toBe('k\\u200bey\\ufeff\\u2028\\u{e0041}');
    expect(clean('tenant/1 ü — 東京 ✓')).toBe('tenant/1 ü — 東京 ✓');
  });

  it('escapes what a server says in a problem: its code, detail, each issue and a redirect', () => {
    const problem = new ApiError(
      400,
      'bad\u001b[0m',
      'no \u001b]0;owned\u0007 way\u202e',
      [{ path: 'a\u2066', message: 'm\u009b2J' }],
      null,
    );
    expect(describeProblem(problem)).toBe('sluice: 400 bad\\u001b[0m: no \\u001b]0;owned\\u0007 way\\u202e\n  a\\u2066: m\\u009b2J\n');
    expect(describeProblem(new UnreachableError('redirecting to http://x/\u009b2J'))).toBe('sluice: redirecting to http://x/\\u009b2J\n');
  });

  it('writes durations for people', () => {
    expect([850, 12_400, 184_000, 7_500_000, 277_200_000].map(span)).toEqual(['850ms', '12s', '3m04s', '2h05m', '3d05h']);
  });
});

describe('rates', () => {
  it('reads N/PERIOD in ms, s, m, h or d, and writes it back in the largest unit that fits', () => {
    const rates = ['10/1s', '5/250ms', '100/90s', '1/2h', '7/1d', '3/1500'].map((text) => parseRate('rate', text));
    expect(rates.map((r) => r.period_ms)).toEqual([1_000, 250, 90_000, 7_200_000, 86_400_000, 1_500]);
    expect(rates.map(rateText)).toEqual(['10/1s', '5/250ms', '100/90s', '1/2h', '7/1d', '3/1500ms']);
    expect(() => parseRate('rate', '10 per second')).toThrow(/--rate must be N\/PERIOD/);
  });

  it('reads and writes a burst as N/PERIOD+B', () => {
    expect(parseRate('rate', '10/1s+50')).toEqual({ limit: 10, period_ms: 1_000, burst: 50 });
    expect(rateText({ limit: 10, period_ms: 1_000, burst: 50 })).toBe('10/1s+50');
    expect(() => parseRate('rate', '10/1s+')).toThrow(/N\/PERIOD\+BURST/);
  });
});

describe('succeeded counts from /metrics', () => {
  it('reads sluice_tasks{status="succeeded"} per queue and when they were counted', () => {
    const text = [
      '# HELP sluice_tasks Tasks per queue and status.',
      '# TYPE sluice_tasks gauge',
      'sluice_tasks{queue="emails",status="succeeded"} 12',
      'sluice_tasks{queue="emails",status="dead"} 3',
      'sluice_tasks{queue="odd\\"name\\\\",status="succeeded"} 1',
      'sluice_tasks_succeeded_total{queue="emails"} 99',
      'sluice_tasks_counted_timestamp_seconds 1790000000.5',
    ].join('\n');
    const counts = parseSucceeded(text);
    expect(Object.fromEntries(counts.byQueue)).toEqual({ emails: 12, 'odd"name\\': 1 });
    expect(counts.countedAt?.toISOString()).toBe('2026-09-21T14:13:20.500Z');
  });

  it('says why there are none: a key without the scope, or one limited to queues', async () => {
    const refusing = (error: ApiError) => ({ text: () => Promise.reject(error) }) as unknown as Api;
    const limited = new ApiError(
      403,
      'queue_not_allowed',
      'this API key is limited to the queues billing, and a scrape spans every queue',
      [],
      null,
    );
    expect(await readSucceeded(refusing(limited))).toEqual({
      unknown: 'succeeded counts come from GET /metrics, which spans every queue: a key limited to queues may not read it',
    });
    const unscoped = new ApiError(403, 'forbidden', 'this API key lacks the "metrics:read" scope', [], null);
    expect(await readSucceeded(refusing(unscoped))).toEqual({
      unknown: 'succeeded counts need a key with metrics:read or admin (they come from GET /metrics)',
    });
  });
});
