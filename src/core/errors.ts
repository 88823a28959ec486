/**
 * Named errors. Each carries the HTTP status and a stable `code`; the API's one `onError`
 * turns them into JSON problem documents (RFC 9457).
 */

export interface FieldIssue {
  /** Where the problem is, e.g. `tasks.3.url` or `SLUICE_QUEUES.emails.url`. */
  path: string;
  message: string;
}

export class SluiceError extends Error {
  override name = 'SluiceError';
  readonly status: number;
  readonly code: string;
  readonly issues: readonly FieldIssue[];

  constructor(status: number, code: string, message: string, options?: { cause?: unknown; issues?: FieldIssue[] }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.status = status;
    this.code = code;
    this.issues = options?.issues ?? [];
  }
}

export class ValidationError extends SluiceError {
  override name = 'ValidationError';
  constructor(issues: FieldIssue[], message = describeIssues(issues)) {
    super(400, 'invalid_request', message, { issues });
  }
}

export class UnauthorizedError extends SluiceError {
  override name = 'UnauthorizedError';
  constructor(message = 'a valid API key is required: send "Authorization: Bearer <key>"') {
    super(401, 'unauthorized', message);
  }
}

export class ForbiddenError extends SluiceError {
  override name = 'ForbiddenError';
  constructor(scope: string) {
    super(403, 'forbidden', `this API key lacks the "${scope}" scope`);
  }
}

/**
 * A key limited to queues (SLUICE_API_KEYS `queues`) asked for a queue it may not use, or for
 * what spans every queue. `issues` names each item of a batch that did.
 */
export class QueueNotAllowedError extends SluiceError {
  override name = 'QueueNotAllowedError';
  constructor(message: string, issues: FieldIssue[] = []) {
    super(403, 'queue_not_allowed', message, { issues });
  }
}

/** Too many requests from one client; `retryAfterS` goes out as `Retry-After`. */
export class TooManyRequestsError extends SluiceError {
  override name = 'TooManyRequestsError';
  readonly retryAfterS: number;
  constructor(message: string, retryAfterS: number) {
    super(429, 'too_many_requests', message);
    this.retryAfterS = retryAfterS;
  }
}

export class NotFoundError extends SluiceError {
  override name = 'NotFoundError';
  constructor(what: string) {
    super(404, 'not_found', `${what} was not found`);
  }
}

export class ConflictError extends SluiceError {
  override name = 'ConflictError';
}

export class PayloadTooLargeError extends SluiceError {
  override name = 'PayloadTooLargeError';
  constructor(limitBytes: number) {
    super(413, 'payload_too_large', `the request body is larger than ${limitBytes} bytes`);
  }
}

/** Bad deployment configuration: names the variable and the fix. Never a client's fault. */
export class ConfigError extends SluiceError {
  override name = 'ConfigError';
  constructor(issues: FieldIssue[]) {
    super(500, 'bad_configuration', `Sluice is misconfigured: ${describeIssues(issues)}`, { issues });
  }
}

function describeIssues(issues: readonly FieldIssue[]): string {
  return issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ');
}
