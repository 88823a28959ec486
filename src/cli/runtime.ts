/**
 * The few host services the CLI needs beyond web-standard `fetch`: its arguments, environment,
 * output streams, exit code and Ctrl-C. Node, Bun and Deno 2 all provide them on `process`;
 * declaring only this much keeps src/cli free of Node's types.
 */

interface Stream {
  write(text: string): boolean;
  on(event: 'error', listener: (error: { code?: string }) => void): unknown;
}

declare const process: {
  argv: string[];
  env: Record<string, string | undefined>;
  stdout: Stream;
  stderr: Stream;
  exitCode?: number | string | undefined;
  on(signal: 'SIGINT' | 'SIGTERM', listener: () => void): unknown;
  off(signal: 'SIGINT' | 'SIGTERM', listener: () => void): unknown;
};

/** Why a command is told to end: a signal, or stdout's reader went away (`sluice tail | head -2`). */
export type Stop = 'SIGINT' | 'SIGTERM' | 'closed';

export interface Host {
  args: string[];
  env: Record<string, string | undefined>;
  out(text: string): void;
  err(text: string): void;
  /** Calls `listener` on Ctrl-C, SIGTERM or a closed stdout, until the returned function is called. */
  onStop(listener: (why: Stop) => void): () => void;
}

export function processHost(): Host {
  const listeners = new Set<(why: Stop) => void>();
  let closed = false;
  // A reader that went away (`sluice tail | head -2`) is not an error of ours, and nothing more can
  // be shown: the command ends as done. (A closed stderr costs only the remarks.)
  process.stdout.on('error', (error) => {
    if (error.code !== 'EPIPE') throw error;
    closed = true;
    for (const listener of listeners) listener('closed');
  });
  process.stderr.on('error', (error) => {
    if (error.code !== 'EPIPE') throw error;
  });
  return {
    args: process.argv.slice(2),
    env: process.env,
    out: (text) => {
      if (!closed) process.stdout.write(text);
    },
    err: (text) => void process.stderr.write(text),
    onStop(listener) {
      const onInt = () => listener('SIGINT');
      const onTerm = () => listener('SIGTERM');
      process.on('SIGINT', onInt);
      process.on('SIGTERM', onTerm);
      listeners.add(listener);
      if (closed) listener('closed');
      return () => {
        process.off('SIGINT', onInt);
        process.off('SIGTERM', onTerm);
        listeners.delete(listener);
      };
    },
  };
}

export function setExitCode(code: number): void {
  process.exitCode = code;
}
