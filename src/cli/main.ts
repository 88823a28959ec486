/**
 * `sluice`: operate a Sluice from the command line, through its HTTP API only (an admin's or a
 * reader's API key; no database access, no server code). Started by the bin, src/cli/sluice.mjs.
 */
import { Api, Interrupted } from './api.ts';
import {
  type CommandSpec,
  commandHelp,
  findCommand,
  flagLines,
  GLOBAL_FLAGS,
  intFlag,
  leadingWords,
  parseTokens,
  usageLine,
} from './args.ts';
import { COMMANDS } from './commands/index.ts';
import type { Command } from './context.ts';
import { CliError, EXIT, InternalError, UsageError } from './errors.ts';
import { describeProblem, makeOutput } from './output.ts';
import { type Host, processHost, setExitCode } from './runtime.ts';

const EXIT_CODES = `Exit codes:
  0    done; also tail ended by Ctrl-C, or by the reader of its output going away (| head)
  1    the API refused the request (4xx): its status, code and detail are on stderr
  2    usage error (an unknown command or option, a missing or bad value, no URL or key): nothing was sent
  3    Sluice could not be reached, did not answer in time, or failed (5xx, such as 503 database_unavailable)
  4    internal error: a bug in sluice, or an answer it could not make sense of (its stack is on stderr)
  130  interrupted by Ctrl-C
  143  ended by SIGTERM (tail too)`;

function mainHelp(commands: readonly Command[]): string {
  const usages = commands.map((c) => usageLine(c).replace(/^sluice /, ''));
  const width = Math.max(...usages.map((u) => u.length));
  return [
    'sluice: operate a Sluice task queue through its HTTP API.',
    '',
    'Usage: sluice COMMAND [ARGUMENTS] [options]',
    '',
    'Commands:',
    ...commands.map((c, i) => `  ${usages[i]!.padEnd(width)}  ${c.summary}`),
    '',
    'Options of every command:',
    flagLines(GLOBAL_FLAGS),
    '',
    'Settings: SLUICE_URL, e.g. http://127.0.0.1:8787 (npm start), and SLUICE_API_KEY. Reading needs',
    'a key with tasks:read (and metrics:read for the succeeded counts of status); tasks retry, cancel',
    'and enqueue need tasks:write; queues, keys and lease need admin, which may do everything.',
    '',
    EXIT_CODES,
    '',
  ].join('\n');
}

export async function main(host: Host): Promise<number> {
  const json = host.args.includes('--json');
  try {
    return await run(host, json);
  } catch (thrown) {
    const error = thrown instanceof CliError ? thrown : new InternalError(thrown);
    // A reader that went away is told nothing: it asked for no more.
    if (!(error instanceof Interrupted && error.why === 'closed')) {
      host.err(json ? `${JSON.stringify(error.problem())}\n` : describeProblem(error));
    }
    return error.exitCode;
  }
}

async function run(host: Host, json: boolean): Promise<number> {
  const tokens = host.args[0] === 'help' ? [...host.args.slice(1), '--help'] : host.args;
  const command = findCommand(COMMANDS, tokens);
  const wantsHelp = tokens.includes('--help') || tokens.includes('-h');
  if (!command) return noCommand(host, leadingWords(tokens), wantsHelp);
  const parsed = parseTokens(command, tokens);
  if (parsed.flags.has('help')) {
    host.out(commandHelp(command));
    return EXIT.ok;
  }
  const controller = new AbortController();
  const stop = host.onStop((why) => controller.abort(why));
  try {
    const api = new Api({
      ...connection(host, parsed.flags),
      timeoutMs: intFlag(parsed, 'timeout', { min: 1, max: 3_600_000 }) ?? 30_000,
      signal: controller.signal,
    });
    await command.run({ api, out: makeOutput(host, json), signal: controller.signal }, parsed);
    // A command that ends calmly when told to stop (tail) still reports a SIGTERM as one. Ctrl-C
    // is how tail is meant to end, so that one is 0.
    return controller.signal.reason === 'SIGTERM' ? EXIT.terminated : EXIT.ok;
  } finally {
    stop();
  }
}

/** No command matched: the help asked for, or the commands a group word starts (`sluice tasks`). */
function noCommand(host: Host, words: string[], wantsHelp: boolean): number {
  const group = COMMANDS.filter((c) => c.words[0] === words[0]);
  if (words.length === 0 || group.length > 0) {
    const help = group.length > 0 ? commandList(group) : mainHelp(COMMANDS);
    if (wantsHelp) {
      host.out(help);
      return EXIT.ok;
    }
    host.err(words.length === 0 ? help : `sluice: ${words.join(' ')}: which one?\n${help}`);
    return EXIT.usage;
  }
  throw new UsageError(`unknown command ${JSON.stringify(words[0])}: see sluice --help`);
}

function commandList(group: readonly CommandSpec<unknown>[]): string {
  return `${group.map((c) => `Usage: ${usageLine(c)}\n  ${c.summary}`).join('\n')}\n\nEach takes --help.\n`;
}

/** Where Sluice is and the key to use: flags first, then the environment. */
function connection(host: Host, flags: Map<string, string | true>): { url: string; apiKey: string } {
  const flag = (name: string) => {
    const v = flags.get(name);
    return typeof v === 'string' ? v : undefined;
  };
  const url = flag('url') ?? host.env.SLUICE_URL;
  const apiKey = flag('api-key') ?? host.env.SLUICE_API_KEY;
  if (!url) throw new UsageError('no Sluice URL: set SLUICE_URL or give --url (npm start serves http://127.0.0.1:8787)');
  if (!/^https?:\/\//i.test(url) || !URL.canParse(url))
    throw new UsageError(`the Sluice URL must be an http(s) URL, not ${JSON.stringify(url)}`);
  if (!apiKey) throw new UsageError('no API key: set SLUICE_API_KEY or give --api-key');
  return { url: url.replace(/\/+$/, ''), apiKey };
}

setExitCode(await main(processHost()));
