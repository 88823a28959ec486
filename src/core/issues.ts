/** Turns zod's issues into Sluice's `FieldIssue`s: a dotted path and a plain message. */
import type { z } from 'zod';
import type { FieldIssue } from './errors.ts';

export function fieldIssues(error: z.ZodError, prefix = ''): FieldIssue[] {
  return error.issues.map((issue) => {
    const path = [prefix, ...issue.path.map(String)].filter((p) => p !== '').join('.');
    return { path, message: issue.message };
  });
}
