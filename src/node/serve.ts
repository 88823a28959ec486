/**
 * Self-hosting on Node: the same app and dispatcher as the Worker, over node-postgres and any
 * `DATABASE_URL`, configured by the same environment variables. `npm run serve`.
 * SIGINT/SIGTERM shut down gracefully: claiming stops, pushes in flight finish, then it exits.
 */
import { z } from 'zod';
import { describeLimits } from '../config.ts';
import { ConfigError } from '../core/errors.ts';
import { SchemaError, startNodeSluice } from './server.ts';

const env = process.env;
const parsed = z
  .object({
    PORT: z.coerce.number().int().min(0).max(65_535).default(8787),
    HOST: z.string().min(1).default('127.0.0.1'),
    SLUICE_POLL_INTERVAL_MS: z.coerce.number().int().min(100).max(3_600_000).default(30_000),
  })
  .safeParse(env);
if (!parsed.success) {
  console.error(`sluice: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  process.exit(2);
}
const sluice = await startNodeSluice({
  env,
  port: parsed.data.PORT,
  host: parsed.data.HOST,
  maxSleepMs: parsed.data.SLUICE_POLL_INTERVAL_MS,
}).catch((error: unknown) => {
  // What the operator must fix, in one line: no stack, no server answering 500s meanwhile.
  if (error instanceof SchemaError || error instanceof ConfigError) {
    console.error(`sluice: ${error.message}`);
    process.exit(1);
  }
  throw error;
});
// Stops are handled before readiness is announced: one sent as soon as it is would otherwise
// find no handler and kill the process, skipping the graceful stop.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, async () => {
    console.log(`sluice: ${signal}: no new claims; waiting for pushes in flight`);
    await sluice.close();
    process.exit(0);
  });
}

console.log(`sluice: listening on ${sluice.url}; dispatcher: ${describeLimits(sluice.config, 'node')}`);
