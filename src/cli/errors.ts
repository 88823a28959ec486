/** What can go wrong in the CLI, each with the exit code scripts see (listed in `sluice --help`). */
import type { Stop } from './runtime.ts';

export const EXIT = {
  ok: 0,
  /** The API refused the request (4xx). */
  refused: 1,
  /** Bad command line or settings: nothing was sent. */
  usage: 2,
  /** Sluice could not be reached, gave no answer in time, or failed (5xx). */
  unavailable: 3,
  /** A bug in the CLI, or an answer it could not make sense of: not the API's refusal. */
  internal: 4,
  /** Ctrl-C: 128 + SIGINT's number, as a shell reports a process the signal ended. */
  interrupted: 130,
  /** SIGTERM: 128 + its number. */
  terminated: 143,
} as const;

/** The exit code of a command told to stop: the signal's, or 0 when the reader of stdout went away. */
export function stoppedExit(why: Stop): number {
  return why === 'SIGINT' ? EXIT.interrupted : why === 'SIGTERM' ? EXIT.terminated : EXIT.ok;
}

export interface FieldIssue {
  path: string;
  message: string;
}

/** A problem as `--json` writes it to stderr: the API's problem document, or one of the same shape. */
export interface ProblemOut {
  status?: number;
  code: string;
  detail: string;
  issues?: FieldIssue[];
  retry_after_s?: number;
  /** Only for an internal error: where it happened. */
  stack?: string;
}

export abstract class CliError extends Error {
  abstract readonly exitCode: number;
  abstract problem(): ProblemOut;
}

export class UsageError extends CliError {
  override name = 'UsageError';
  readonly exitCode = EXIT.usage;
  problem(): ProblemOut {
    return { code: 'usage', detail: this.message };
  }
}

/** The API answered with a problem document (RFC 9457). */
export class ApiError extends CliError {
  override name = 'ApiError';
  readonly exitCode: number;
  readonly status: number;
  readonly code: string;
  readonly issues: FieldIssue[];
  readonly retryAfterS: number | null;
  constructor(status: number, code: string, detail: string, issues: FieldIssue[], retryAfterS: number | null) {
    super(detail);
    this.status = status;
    this.code = code;
    this.issues = issues;
    this.retryAfterS = retryAfterS;
    this.exitCode = status >= 500 ? EXIT.unavailable : EXIT.refused;
  }
  problem(): ProblemOut {
    return {
      status: this.status,
      code: this.code,
      detail: this.message,
      ...(this.issues.length ? { issues: this.issues } : {}),
      ...(this.retryAfterS === null ? {} : { retry_after_s: this.retryAfterS }),
    };
  }
}

/** No answer: refused connection, unknown host, timeout, or an answer that is not Sluice's. */
export class UnreachableError extends CliError {
  override name = 'UnreachableError';
  readonly exitCode = EXIT.unavailable;
  problem(): ProblemOut {
    return { code: 'unreachable', detail: this.message };
  }
}

/** Anything else thrown: reported with its stack, under a code of its own (1 is the API's refusal). */
export class InternalError extends CliError {
  override name = 'InternalError';
  readonly exitCode = EXIT.internal;
  constructor(cause: unknown) {
    super(cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause), { cause });
  }
  problem(): ProblemOut {
    const stack = this.cause instanceof Error ? this.cause.stack : undefined;
    return { code: 'internal', detail: this.message, ...(stack === undefined ? {} : { stack }) };
  }
}
