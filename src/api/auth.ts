/** Bearer API keys with scopes and queues (docs/DESIGN.md §8), and a brake on guessing them. */
import { createMiddleware } from 'hono/factory';
import { ForbiddenError, TooManyRequestsError, UnauthorizedError } from '../core/errors.ts';
import { type ApiKeyEntry, matchApiKey, type Scope } from '../security/api-keys.ts';
import { BadKeyBrake } from '../security/bad-keys.ts';
import type { AppEnv } from './context.ts';

const brake = new BadKeyBrake();

/** IPv4 addresses count one by one; IPv6 ones by their /64, which one client usually holds whole. */
export function clientGroup(address: string | null): string | null {
  if (!address?.includes(':') || /^::ffff:\d+\.\d+\.\d+\.\d+$/i.test(address)) return address;
  const [head = '', tail] = address.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...new Array<string>(Math.max(0, 8 - h.length - t.length)).fill('0'), ...t];
  return `${groups
    .slice(0, 4)
    .map((g) => g.toLowerCase().replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}

/**
 * The entry of a presented API key (the API's bearer keys and the dashboard's login alike): a
 * bad key throws 401 and counts against its client's address, which gets 429 once braked.
 */
export async function authenticateKey(
  apiKeys: readonly ApiKeyEntry[],
  clientAddress: string | null,
  presented: string,
): Promise<ApiKeyEntry> {
  const entry = await matchApiKey(apiKeys, presented);
  if (entry) return entry;
  // A valid key always gets through (a guesser learns nothing it could use: keys are
  // 256-bit random); bad keys from a busy address are answered 429 instead of 401.
  const address = clientGroup(clientAddress);
  const waitMs = address ? brake.blockedFor(address) : 0;
  if (waitMs > 0) throw new TooManyRequestsError('too many bad API keys from this address; try again later', Math.ceil(waitMs / 1000));
  if (address) brake.failed(address);
  throw new UnauthorizedError('the API key is not valid');
}

export function requireScope(scope: Scope) {
  return createMiddleware<AppEnv>(async (c, next) => {
    const header = c.req.header('authorization') ?? '';
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match?.[1]) throw new UnauthorizedError();
    const entry = await authenticateKey(c.var.config.apiKeys, c.var.clientAddress, match[1]);
    if (!entry.scopes.includes(scope) && !entry.scopes.includes('admin')) throw new ForbiddenError(scope);
    c.set('canRead', entry.scopes.includes('tasks:read') || entry.scopes.includes('admin'));
    c.set('forwardTo', entry.forwardTo ?? []);
    c.set('queueScope', entry.queues ?? null);
    await next();
  });
}
