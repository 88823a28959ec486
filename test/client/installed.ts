/** The tests that use test/client's own dependencies call this first (Node-only; not part of the compiled client). */
import { existsSync } from 'node:fs';

/** Fails with the fix when test/client's dependencies are not installed (npm test installs them first). */
export function requireInstalled(): void {
  if (!existsSync(new URL('./node_modules/.package-lock.json', import.meta.url))) {
    throw new Error('test/client has no node_modules: run `node scripts/ensure-deps.mjs` (npm test runs it first)');
  }
}
