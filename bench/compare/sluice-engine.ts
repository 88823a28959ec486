/**
 * Sluice's engine alone: the production claim and settle SQL, driven in-process by `dispatchRun`
 * with a no-op delivery in place of the signed HTTP push. The apples-to-apples row beside the
 * peers, which also run their handlers in-process.
 */
import { loadConfig } from '../../src/config.ts';
import type { PushResult } from '../../src/core/outcome.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { dispatchRun } from '../../src/dispatcher/run.ts';
import { migrateDatabase } from '../../src/node/migrations.ts';
import { openPgDb } from '../../src/node/pg-db.ts';
import { loadKeyring } from '../../src/security/keyring.ts';
import { newTask } from '../../test/helpers/tasks.ts';
import { type BenchJob, batches, type Contender, IN_FLIGHT, poolSize } from './contender.ts';
import { prefillFinished, QUEUE, type SluiceSecrets } from './sluice-common.ts';

/** One run's claiming budget; runs repeat until every job succeeded. */
const RUN_BUDGET_MS = 30_000;
/** A drain that has not finished by then is broken, not slow. */
const GIVE_UP_MS = 600_000;
const OK: PushResult = { kind: 'response', status: 200, headers: {}, body: '', durationMs: 0 };

/** The dispatcher's connections at either level: it claims many tasks a statement, not one a connection. */
const POOL_SIZE = poolSize(IN_FLIGHT);

/** `inFlight`: pushes in flight (SLUICE_DISPATCH_PARALLELISM); the peers' 16, or Sluice's Node default. */
export function sluiceEngine(secrets: SluiceSecrets, inFlight: number = IN_FLIGHT): Contender {
  const suffix = inFlight === IN_FLIGHT ? '16' : '';
  return {
    id: `S${suffix}`,
    kind: 'Sluice engine',
    inFlight,
    label: `Sluice engine (in-process, ${inFlight} in flight)`,
    config: `dispatchRun with a no-op push, SLUICE_DISPATCH_PARALLELISM ${inFlight}, claim batch default (100), pool ${POOL_SIZE}; keyed: concurrency_limit 1 per task; enqueue with taskInsertMany, 500 a call`,
    role: 'sluice',
    async open(db, { keyed, finished }) {
      const env = { ...secrets.env(db.url), SLUICE_DISPATCH_PARALLELISM: String(inFlight) };
      const config = loadConfig(env);
      const keyring = await loadKeyring(config.signingKeys);
      await migrateDatabase(db.url);
      await prefillFinished(db, finished);
      const producer = openPgDb(db.url, 2);
      // Every other field as the API sets it by default (test/helpers/tasks.ts).
      const task = (job: BenchJob) =>
        newTask({
          queue: QUEUE,
          url: 'http://127.0.0.1:1/noop',
          body: JSON.stringify(job),
          concurrencyKey: job.key,
          concurrencyLimit: keyed ? 1 : null,
        });
      return {
        cpu: 'self',
        async enqueue(jobs) {
          for (const batch of batches(jobs)) await taskInsertMany(producer, batch.map(task));
        },
        async enqueueOne(job) {
          await taskInsertMany(producer, [task(job)]);
        },
        async start(handler, expected) {
          const dispatcherDb = openPgDb(db.url, POOL_SIZE);
          const deps = {
            db: dispatcherDb,
            config,
            keyring,
            push: async (leased: { body: string | null }) => {
              await handler.handle(JSON.parse(leased.body ?? '{}') as BenchJob);
              return OK;
            },
          };
          const started = Date.now();
          // Stopped early only when the harness's time limit cut the drain short.
          const abort = new AbortController();
          const loop = (async () => {
            let succeeded = 0;
            while (succeeded < expected && !abort.signal.aborted) {
              if (Date.now() - started > GIVE_UP_MS)
                throw new Error(`Sluice engine: ${succeeded} of ${expected} succeeded after ${GIVE_UP_MS} ms`);
              const report = await dispatchRun(deps, { budgetMs: RUN_BUDGET_MS, signal: abort.signal });
              succeeded += report.succeeded;
              // Idle with work left (a settle still in flight elsewhere): do not spin.
              if (report.claimed === 0) await new Promise((r) => setTimeout(r, 5));
            }
          })();
          return {
            async stop() {
              abort.abort();
              try {
                await loop;
              } finally {
                await dispatcherDb.close();
              }
            },
          };
        },
        close: () => producer.close(),
      };
    },
  };
}
