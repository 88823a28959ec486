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
 * `--finished n`: n succeeded tasks written straight into history before the timed runs, so the
 * figures can be read beside a big history. In another queue, finished a minute ago (inside retention).
 */
export async function prefillFinished(db: Database, n: number): Promise<void> {
  if (n <= 0) return;
  await db.pool.query(
    `insert into sluice.finished (bucket, id, queue, status, priority, attempts, max_attempts, deferrals, resumes,
       finished_at, created_at, run_at, timeout_ms, lease_ms, last_lease_id, last_status,
       final_started_at, final_duration_ms, backoff_initial_ms, backoff_max_ms, backoff_factor, backoff_jitter, method,
       content_type, url, headers, body)
     select (select max(bucket) from sluice.history_buckets), nextval(pg_get_serial_sequence('sluice.tasks', 'id')), 'history',
       'succeeded', 0, 1, 5, 0, 0, now() - interval '1 minute', now() - interval '2 minutes', now() - interval '2 minutes', 30000, 60000, gen_random_uuid(), 200, now() - interval '61 seconds', 1000,
       1000, 3600000, 2, 0.25, 'POST', 'application/json', 'http://127.0.0.1:1/noop', '{}', '{}'
     from generate_series(1, $1::int)`,
    [n],
  );
}
