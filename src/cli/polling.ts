/** What the commands that keep polling (`tail`, `listen`) share: which failures they ride out, and their pause. */
import { ApiError, type CliError, UnreachableError } from './errors.ts';

/** What a later poll may survive: no answer, or the server's failure (the database down, say). */
export function transient(error: unknown): error is CliError {
  return error instanceof UnreachableError || (error instanceof ApiError && (error.status >= 500 || error.status === 429));
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
