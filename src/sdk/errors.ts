/** Errors the SDK raises, and the two a task function may throw to steer the protocol. */

export interface FieldIssue {
  path: string;
  message: string;
}

/** The API answered with a problem (4xx/5xx): `status`, `code` and, for bad input, `issues`. */
export class SluiceApiError extends Error {
  override name = 'SluiceApiError';
  readonly status: number;
  readonly code: string;
  readonly issues: readonly FieldIssue[];
  constructor(status: number, code: string, message: string, issues: readonly FieldIssue[] = []) {
    super(message);
    this.status = status;
    this.code = code;
    this.issues = issues;
  }
}

/** Throw from a task function when retrying cannot help: the task ends `dead` at once. */
export class NonRetriableError extends Error {
  override name = 'NonRetriableError';
}

/**
 * Throw from a task function to be tried again after `retryAfterMs`, without using an
 * attempt (a 503 with `Retry-After`, or a lease `release`).
 */
export class RetryAfterError extends Error {
  override name = 'RetryAfterError';
  readonly retryAfterMs: number;
  constructor(retryAfterMs: number, message = `retry after ${retryAfterMs} ms`) {
    super(message);
    this.retryAfterMs = retryAfterMs;
  }
}
