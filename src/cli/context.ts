/** What a command runs with: the API, the output, and the signal Ctrl-C aborts. */
import type { Api } from './api.ts';
import type { CommandSpec } from './args.ts';
import { UsageError } from './errors.ts';
import type { Output } from './output.ts';

export interface Context {
  api: Api;
  out: Output;
  /** Aborted on Ctrl-C, SIGTERM or a closed stdout, with the `Stop` as its reason. */
  signal: AbortSignal;
}

export type Command = CommandSpec<Context>;

/**
 * One path segment: queue names, keys and ids as they are, whatever characters they hold. But
 * "." and ".." are folders to every URL (`%2e` too): `/keys/..` would be sent as another path,
 * so they are refused before anything is sent.
 */
export function seg(text: string): string {
  if (text === '.' || text === '..') {
    throw new UsageError(`${JSON.stringify(text)} cannot be sent as a part of a URL path, where "." and ".." name folders (encoded too)`);
  }
  return encodeURIComponent(text);
}
