/**
 * Commands as data: each declares its words, arguments and flags, so that the parser refuses
 * anything undeclared and the help names every flag from the same declaration.
 */
import { UsageError } from './errors.ts';

export interface FlagSpec {
  /** Without the dashes: `limit` is `--limit`. */
  name: string;
  /** The value's placeholder in help (`N`, `URL`); none for a switch. */
  value?: string;
  help: string;
  required?: boolean;
}

export interface ArgSpec {
  name: string;
  optional?: boolean;
}

export interface Parsed {
  args: Record<string, string | undefined>;
  flags: Map<string, string | true>;
}

export interface CommandSpec<Context> {
  /** The words that name it: `['queues', 'set']`. */
  words: string[];
  args: ArgSpec[];
  flags: FlagSpec[];
  summary: string;
  /** More paragraphs for `--help`. */
  details?: string;
  run(context: Context, parsed: Parsed): Promise<void>;
}

/** Flags every command takes. */
export const GLOBAL_FLAGS: FlagSpec[] = [
  { name: 'url', value: 'URL', help: "Sluice's base URL. Default: $SLUICE_URL" },
  { name: 'api-key', value: 'KEY', help: 'an API key. Default: $SLUICE_API_KEY (better: a flag shows in the process list)' },
  { name: 'json', help: 'machine-readable output: one JSON document on stdout (tail: one per line); problems as JSON on stderr' },
  { name: 'timeout', value: 'MS', help: 'give up on a request after MS milliseconds. Default: 30000' },
  { name: 'help', help: 'show help (also -h); `sluice COMMAND --help` for one command' },
];

/** Finds the command the leading words name, the longest match first. */
export function findCommand<C>(commands: readonly CommandSpec<C>[], tokens: readonly string[]): CommandSpec<C> | null {
  const words = leadingWords(tokens);
  let best: CommandSpec<C> | null = null;
  for (const c of commands) {
    if (c.words.every((w, i) => words[i] === w) && c.words.length > (best?.words.length ?? 0)) best = c;
  }
  return best;
}

/** The words before any argument of a command: tokens that are not flags (nor a global flag's value). */
export function leadingWords(tokens: readonly string[]): string[] {
  const words: string[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (token === '--') break;
    if (token.startsWith('-')) {
      const spec = GLOBAL_FLAGS.find((f) => `--${f.name}` === token);
      if (spec?.value) i++;
      continue;
    }
    words.push(token);
  }
  return words;
}

/** Parses `tokens` (the command's words included) against the command's and the global flags. */
export function parseTokens<C>(command: CommandSpec<C>, tokens: readonly string[]): Parsed {
  const known = [...command.flags, ...GLOBAL_FLAGS];
  const flags = new Map<string, string | true>();
  const positional: string[] = [];
  let onlyArgs = false;
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (onlyArgs || !token.startsWith('-') || token === '-') {
      positional.push(token);
      continue;
    }
    if (token === '--') {
      onlyArgs = true;
      continue;
    }
    if (token === '-h') {
      flags.set('help', true);
      continue;
    }
    const eq = token.indexOf('=');
    const name = token.slice(2, eq === -1 ? undefined : eq);
    const spec = token.startsWith('--') ? known.find((f) => f.name === name) : undefined;
    if (!spec) {
      const cmd = `sluice ${command.words.join(' ')}`;
      throw new UsageError(`unknown option ${token.split('=')[0]} for \`${cmd}\` (its options: \`${cmd} --help\`)`);
    }
    if (!spec.value) {
      if (eq !== -1) throw new UsageError(`--${name} takes no value`);
      flags.set(name, true);
      continue;
    }
    // A value may begin with "-" (`--priority -5`), so the next token is taken as it is.
    const value = eq !== -1 ? token.slice(eq + 1) : tokens[++i];
    if (value === undefined) throw new UsageError(`--${name} needs a value: --${name} ${spec.value}`);
    flags.set(name, value);
  }
  if (flags.has('help')) return { args: {}, flags };
  const rest = positional.slice(command.words.length);
  const args: Record<string, string | undefined> = {};
  command.args.forEach((a, i) => {
    args[a.name] = rest[i];
    if (rest[i] === undefined && !a.optional) throw new UsageError(`missing ${a.name}: ${usageLine(command)}`);
  });
  if (rest.length > command.args.length) {
    throw new UsageError(`unexpected argument ${JSON.stringify(rest[command.args.length])}: ${usageLine(command)}`);
  }
  for (const f of command.flags) {
    if (f.required && !flags.has(f.name)) throw new UsageError(`--${f.name} is required: ${usageLine(command)}`);
  }
  return { args, flags };
}

/**
 * A flag's value as a whole number; `undefined` when not given. `range` is for the CLI's own
 * settings: a value the API takes is left to the API to judge, so its rules live in one place.
 */
export function intFlag(parsed: Parsed, name: string, range?: { min: number; max: number }): number | undefined {
  const value = parsed.flags.get(name);
  if (value === undefined) return undefined;
  const n = typeof value === 'string' && /^-?\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(n)) throw new UsageError(`--${name} must be a whole number, not ${JSON.stringify(value)}`);
  if (range && (n < range.min || n > range.max)) throw new UsageError(`--${name} must be from ${range.min} to ${range.max}, not ${n}`);
  return n;
}

export function stringFlag(parsed: Parsed, name: string): string | undefined {
  const value = parsed.flags.get(name);
  return typeof value === 'string' ? value : undefined;
}

export function usageLine<C>(command: CommandSpec<C>): string {
  const args = command.args.map((a) => (a.optional ? `[${a.name}]` : a.name));
  const required = command.flags.filter((f) => f.required).map((f) => `--${f.name} ${f.value ?? ''}`.trim());
  const optional = command.flags.some((f) => !f.required) ? ['[options]'] : [];
  return ['sluice', ...command.words, ...args, ...required, ...optional].join(' ');
}

export function flagLines(flags: readonly FlagSpec[]): string {
  const names = flags.map((f) => `--${f.name}${f.value ? ` ${f.value}` : ''}`);
  const width = Math.max(...names.map((n) => n.length));
  return flags.map((f, i) => `  ${names[i]!.padEnd(width)}  ${f.help}`).join('\n');
}

export function commandHelp<C>(command: CommandSpec<C>): string {
  return [
    `Usage: ${usageLine(command)}`,
    '',
    command.summary,
    ...(command.details ? ['', command.details] : []),
    ...(command.flags.length ? ['', 'Options:', flagLines(command.flags)] : []),
    '',
    'Options of every command:',
    flagLines(GLOBAL_FLAGS),
    '',
    'Exit codes: 0 done, 1 refused by the API (4xx), 2 usage error, 3 unreachable or failed (5xx), 4 internal error, 130 Ctrl-C, 143 SIGTERM.',
    '',
  ].join('\n');
}
