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

export interface Host {
  args: string[];
  env: Record<string, string | undefined>;
  out(text: string): void;
  err(text: string): void;
  /** Calls `listener` on Ctrl-C or SIGTERM until the returned function is called. */
  onInterrupt(listener: () => void): () => void;
}

export function processHost(): Host {
  // A reader that went away (`sluice tasks list | head`) is not an error of ours.
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (error) => {
      if (error.code !== 'EPIPE') throw error;
    });
  }
  return {
    args: process.argv.slice(2),
    env: process.env,
    out: (text) => void process.stdout.write(text),
    err: (text) => void process.stderr.write(text),
    onInterrupt(listener) {
      process.on('SIGINT', listener);
      process.on('SIGTERM', listener);
      return () => {
        process.off('SIGINT', listener);
        process.off('SIGTERM', listener);
      };
    },
  };
}

export function setExitCode(code: number): void {
  process.exitCode = code;
}
