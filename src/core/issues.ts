/** Turns zod's issues into Sluice's `FieldIssue`s: a dotted path and a plain message. */
import type { z } from 'zod';
import type { FieldIssue } from './errors.ts';

export function fieldIssues(error: z.ZodError, prefix = ''): FieldIssue[] {
  return error.issues.flatMap((issue) => {
    const at = (...extra: PropertyKey[]) => [prefix, ...issue.path.map(String), ...extra.map(String)].filter((p) => p !== '').join('.');
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => ({ path: at(key), message: 'is not a known field' }));
    }
    return [{ path: at(), message: issue.message }];
  });
}
