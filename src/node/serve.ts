/**
 * Self-hosting on Node: the same app and dispatcher as the Worker, over node-postgres and any
 * `DATABASE_URL`, configured by the same environment variables. `npm run serve`.
 * SIGINT/SIGTERM shut down gracefully: claiming stops, pushes in flight finish, then it exits.
 */
import { describeLimits, loadServeOptions, type ServeOptions } from '../config.ts';
import { ConfigError } from '../core/errors.ts';
import { SchemaError, startNodeSluice } from './server.ts';

const env = process.env;
/** What the operator must fix, in one line: no stack, no server answering 500s meanwhile. */
function refuse(error: unknown): never {
  if (error instanceof SchemaError || error instanceof ConfigError) {
    console.error(`sluice: ${error.message}`);
    process.exit(1);
  }
  throw error;
}
let serve: ServeOptions;
try {
  serve = loadServeOptions(env);
} catch (error) {
  refuse(error);
}
const sluice = await startNodeSluice({ env, port: serve.port, host: serve.host, maxSleepMs: serve.pollIntervalMs }).catch(refuse);
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
