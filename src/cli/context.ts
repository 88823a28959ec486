/** What a command runs with: the API, the output, and the signal Ctrl-C aborts. */
import type { Api } from './api.ts';
import type { CommandSpec } from './args.ts';
import type { Output } from './output.ts';

export interface Context {
  api: Api;
  out: Output;
  /** Aborted on Ctrl-C, SIGTERM or a closed stdout, with the `Stop` as its reason. */
  signal: AbortSignal;
}

export type Command = CommandSpec<Context>;

/** One path segment: queue names, keys and ids as they are, whatever characters they hold. */
export const seg = (text: string): string => encodeURIComponent(text);
