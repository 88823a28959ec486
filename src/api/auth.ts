/** Bearer API keys with scopes (DESIGN.md §8), and a brake on guessing them. */
import { createMiddleware } from 'hono/factory';
import { ForbiddenError, TooManyRequestsError, UnauthorizedError } from '../core/errors.ts';
import { matchApiKey, type Scope } from '../security/api-keys.ts';
import { BadKeyBrake } from '../security/bad-keys.ts';
import type { AppEnv } from './context.ts';

const brake = new BadKeyBrake();

export function requireScope(scope: Scope) {
  return createMiddleware<AppEnv>(async (c, next) => {
    const address = c.var.clientAddress;
    const waitMs = address ? brake.blockedFor(address) : 0;
    if (waitMs > 0) throw new TooManyRequestsError('too many bad API keys from this address; try again later', Math.ceil(waitMs / 1000));
    const header = c.req.header('authorization') ?? '';
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match?.[1]) throw new UnauthorizedError();
    const entry = await matchApiKey(c.var.config.apiKeys, match[1]);
    if (!entry) {
      if (address) brake.failed(address);
      throw new UnauthorizedError('the API key is not valid');
    }
    if (!entry.scopes.includes(scope) && !entry.scopes.includes('admin')) throw new ForbiddenError(scope);
    c.set('canRead', entry.scopes.includes('tasks:read') || entry.scopes.includes('admin'));
    await next();
  });
}
