/** Bearer API keys with scopes (DESIGN.md §8). */
import { createMiddleware } from 'hono/factory';
import { ForbiddenError, UnauthorizedError } from '../core/errors.ts';
import { matchApiKey, type Scope } from '../security/api-keys.ts';
import type { AppEnv } from './context.ts';

export function requireScope(scope: Scope) {
  return createMiddleware<AppEnv>(async (c, next) => {
    const header = c.req.header('authorization') ?? '';
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match?.[1]) throw new UnauthorizedError();
    const entry = await matchApiKey(c.var.config.apiKeys, match[1]);
    if (!entry) throw new UnauthorizedError('the API key is not valid');
    if (!entry.scopes.includes(scope) && !entry.scopes.includes('admin')) throw new ForbiddenError(scope);
    c.set('canRead', entry.scopes.includes('tasks:read') || entry.scopes.includes('admin'));
    await next();
  });
}
