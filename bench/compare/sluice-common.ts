/** What both Sluice rows share: the keys they run with, their queue, and the `--finished` pre-fill. */
import { generateApiKey } from '../../src/security/api-keys.ts';
import { generateSigningJwk } from '../../src/security/keyring.ts';
import type { Database } from './cluster.ts';

export const QUEUE = 'bench';

export interface SluiceSecrets {
  apiKey: string;
  /** Sluice's environment for a database (as bench/setup.ts builds it, without the Neon proxy). */
  env(databaseUrl: string): Record<string, string>;
}

export async function sluiceSecrets(): Promise<SluiceSecrets> {
  const key = await generateApiKey('bench');
  const signingKeys = JSON.stringify({ keys: [await generateSigningJwk('EdDSA', 'bench-1')] });
  return {
    apiKey: key.key,
    env: (databaseUrl) => ({
      DATABASE_URL: databaseUrl,
      SLUICE_API_KEYS: JSON.stringify([key.entry]),
      SLUICE_SIGNING_KEYS: signingKeys,
      SLUICE_ALLOW_PRIVATE_TARGETS: 'true',
    }),
  };
}

/**
 * `--finished n`: n succeeded tasks written straight into the table before the timed runs, so the
 * figures can be read on a big table. In another queue, finished a minute ago (inside retention).
 */
export async function prefillFinished(db: Database, n: number): Promise<void> {
  if (n <= 0) return;
  await db.pool.query(
    `insert into sluice.tasks (queue, status, url, body, max_attempts, attempts, backoff, timeout_ms, lease_ms,
       created_at, updated_at, finished_at, last_status)
     select 'history', 'succeeded', 'http://127.0.0.1:1/noop', '{}', 5, 1,
       '{"initial_ms":1000,"max_ms":3600000,"factor":2,"jitter":0.25}', 30000, 60000,
       now() - interval '2 minutes', now() - interval '1 minute', now() - interval '1 minute', 200
     from generate_series(1, $1::int)`,
    [n],
  );
}
