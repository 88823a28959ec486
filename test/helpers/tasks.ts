/** Building tasks for db-tier tests, every field set as the API would set it. */
import { DEFAULT_RETRY } from '../../src/core/types.ts';
import type { NewTask } from '../../src/db/new-task.ts';

export function newTask(overrides: Partial<NewTask> = {}): NewTask {
  return {
    queue: 'default',
    url: 'https://example.com/hook',
    method: 'POST',
    headers: {},
    body: '{"n":1}',
    contentType: 'application/json',
    concurrencyKey: null,
    concurrencyLimit: null,
    rateLimit: null,
    parentId: null,
    priority: 0,
    runAt: null,
    delayMs: null,
    expiresAt: null,
    ttlMs: null,
    maxAttempts: DEFAULT_RETRY.maxAttempts,
    backoff: DEFAULT_RETRY.backoff,
    timeoutMs: 30_000,
    leaseMs: 60_000,
    dedupKey: null,
    ...overrides,
  };
}
