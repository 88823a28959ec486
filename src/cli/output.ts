/**
 * Output: JSON for scripts, aligned tables and lines for people. Task data (keys, errors,
 * results) comes from endpoints and callers, and problems from whatever answers at the URL, so
 * every line of text output is escaped: a task's error cannot move the cursor, retitle a
 * terminal, or reorder what it shows.
 */
import type { CliError } from './errors.ts';
import type { Host } from './runtime.ts';

export interface Output {
  readonly json: boolean;
  /** A command's one answer: `data` as JSON, or `text()` for people. */
  result(data: unknown, text: () => string): void;
  /** One event of a stream (`tail`): a JSON line, or a line of text. */
  event(data: unknown, text: string): void;
  /** A remark for people, on stderr; left out with --json. */
  note(text: string): void;
  /** A problem the command survives (tail goes on): on stderr, as text or as a JSON line. */
  warn(error: CliError, outcome: string): void;
}

export function makeOutput(host: Host, json: boolean): Output {
  return {
    json,
    result: (data, text) => host.out(json ? `${JSON.stringify(data, null, 2)}\n` : lines(text())),
    event: (data, text) => host.out(json ? `${JSON.stringify(data)}\n` : lines(text)),
    note: (text) => {
      if (!json) host.err(lines(text));
    },
    warn: (error, outcome) =>
      host.err(json ? `${JSON.stringify({ ...error.problem(), outcome })}\n` : `${describeProblem(error).trimEnd()} (${outcome})\n`),
  };
}

/** The one line (plus one per issue, or per frame of an internal error's stack) a problem takes on stderr, escaped. */
export function describeProblem(error: CliError): string {
  const p = error.problem();
  if (p.code === 'internal') {
    const frames = (p.stack ?? '').split('\n').filter((line) => /^\s+at /.test(line));
    return `sluice: internal error (a bug: please report it): ${lines([clean(p.detail), ...frames].join('\n'))}`;
  }
  const head = p.status === undefined ? clean(p.detail) : `${p.status} ${clean(p.code)}: ${clean(p.detail)}`;
  const retry = p.retry_after_s === undefined ? '' : ` (retry after ${p.retry_after_s} s)`;
  const issues = (p.issues ?? []).map((i) => `\n  ${clean(i.path) || '(request)'}: ${clean(i.message)}`).join('');
  return `sluice: ${head}${retry}${issues}\n`;
}

/** Text for people as lines, each escaped (escaping twice changes nothing), ending with a newline. */
function lines(text: string): string {
  return `${text.replace(/\n$/, '').split('\n').map(clean).join('\n')}\n`;
}

export type Cell = string | number | null;

/** Columns padded to their widest cell; numbers to the right. */
export function table(headers: string[], rows: Cell[][]): string {
  const cells = rows.map((row) => row.map((c) => (c === null ? '-' : typeof c === 'number' ? String(c) : clean(c))));
  const numeric = headers.map(
    (_, i) => rows.some((r) => typeof r[i] === 'number') && rows.every((r) => typeof r[i] === 'number' || r[i] === null),
  );
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i]!.length)));
  const line = (row: string[]) =>
    row
      .map((c, i) => (numeric[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...cells.map(line)].join('\n');
}

/**
 * Text written as escapes where a terminal would not show it as it is, so it prints on one
 * line, harmlessly: controls (C0, DEL, C1: cursor moves, titles), format characters (Cf: bidi
 * overrides and isolates that reorder what follows, direction marks, zero-width spaces and
 * joiners, BOMs, tags) and the line and paragraph separators. Two keys that look alike show
 * their difference; the price is that an emoji built with joiners shows its parts.
 */
export function clean(text: string): string {
  return text.replace(/[\p{Cc}\p{Cf}\u2028\u2029]/gu, (c) => {
    const named: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };
    const code = c.codePointAt(0)!;
    return named[c] ?? (code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, '0')}`);
  });
}

/** At most `max` characters, cleaned, with an ellipsis when cut. */
export function short(text: string | null, max: number): string | null {
  if (text === null) return null;
  const c = clean(text);
  return c.length > max ? `${c.slice(0, max - 1)}…` : c;
}

/** An ISO time to the second, as the API's clock gave it. */
export function time(iso: string | null): string {
  return iso === null ? '-' : iso.replace(/\.\d+Z$/, 'Z');
}

/** A duration for people: 850ms, 12s, 3m04s, 2h05m, 3d04h. */
export function span(ms: number): string {
  if (ms < 0) return `-${span(-ms)}`;
  if (ms < 1_000) return `${Math.round(ms)}ms`;
  const s = Math.floor(ms / 1_000);
  const two = (n: number) => String(n).padStart(2, '0');
  if (s < 60) return `${s}s`;
  if (s < 3_600) return `${Math.floor(s / 60)}m${two(s % 60)}s`;
  if (s < 86_400) return `${Math.floor(s / 3_600)}h${two(Math.floor(s / 60) % 60)}m`;
  return `${Math.floor(s / 86_400)}d${two(Math.floor(s / 3_600) % 24)}h`;
}

/** A limit with where it comes from: `5 (override)`, `none (default)`. */
export function sourced(setting: { value: number | boolean | string | null; source: string }): string {
  const value = setting.value === null ? 'none' : setting.value === true ? 'yes' : setting.value === false ? 'no' : String(setting.value);
  return `${value} (${setting.source})`;
}
