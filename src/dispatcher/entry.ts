/**
 * Starting a dispatcher run from the Worker: opens its own database handle (it outlives the
 * request that kicked it) and closes it at the end.
 */
import { type Config, describeLimits } from '../config.ts';
import type { OpenDb } from '../db/db.ts';
import { loadKeyring } from '../security/keyring.ts';
import { dispatchRun, type RunReport } from './run.ts';

/** Time budgets: a kick runs within a request's `waitUntil` allowance, the cron within its minute. */
export const RUN_BUDGET_MS = { kick: 10_000, cron: 45_000 } as const;

let limitsLogged = false;

export async function runDispatcher(
  config: Config,
  openDb: (config: Config) => OpenDb,
  trigger: keyof typeof RUN_BUDGET_MS,
): Promise<RunReport> {
  if (!limitsLogged) {
    limitsLogged = true;
    console.info(`sluice dispatcher: ${describeLimits(config)}`);
  }
  const db = openDb(config);
  try {
    const keyring = await loadKeyring(config.signingKeys);
    // Each push is a subrequest; keep a few for the database connection and its retries.
    const maxPushes = config.maxSubrequests - 10;
    return await dispatchRun({ db, config, keyring }, { budgetMs: RUN_BUDGET_MS[trigger], maxPushes });
  } finally {
    await db.close();
  }
}
