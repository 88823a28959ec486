/** The adapter tests use test/adapters' own dependencies: this fails with the fix when they are missing. */
import { existsSync } from 'node:fs';

export function requireInstalled(): void {
  if (!existsSync(new URL('./node_modules/.package-lock.json', import.meta.url))) {
    throw new Error('test/adapters has no node_modules: run `node scripts/ensure-deps.mjs` (npm test runs it first)');
  }
}
