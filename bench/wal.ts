/**
 * `node bench/wal.ts [--tasks N] [--keyed] [--dedup-keys] [--dedup-ttl-ms MS]`: where a drain's WAL goes, by record
 * type (pg_walinspect), for Sluice's engine: N tasks enqueued, a checkpoint, then drained in-process
 * with a no-op push. Prints bytes per task by resource manager and record type, FPI bytes apart.
 * With `--dedup-keys`, every task has a dedup key of its own; with `--dedup-ttl-ms`, kept that long
 * after it finishes too (its history row's entry in `finished_dedup`, docs/DESIGN.md §10).
 */
import { parseArgs } from 'node:util';
import { loadConfig } from '../src/config.ts';
import type { PushResult } from '../src/core/outcome.ts';
import { taskInsertMany } from '../src/db/enqueue.ts';
import { dispatchRun } from '../src/dispatcher/run.ts';
import { migrateDatabase } from '../src/node/migrations.ts';
import { openPgDb } from '../src/node/pg-db.ts';
import { loadKeyring } from '../src/security/keyring.ts';
import { newTask } from '../test/helpers/tasks.ts';
import { startCluster } from './compare/cluster.ts';
import { sluiceSecrets } from './compare/sluice-common.ts';

const { values } = parseArgs({
  options: {
    tasks: { type: 'string', default: '20000' },
    keyed: { type: 'boolean', default: false },
    'dedup-keys': { type: 'boolean', default: false },
    'dedup-ttl-ms': { type: 'string' },
  },
});
const dedupTtlMs = values['dedup-ttl-ms'] === undefined ? null : Number(values['dedup-ttl-ms']);
const dedupKeys = values['dedup-keys'] || dedupTtlMs !== null;
const n = Number(values.tasks);
const cluster = await startCluster();
try {
  await cluster.admin.query('create extension if not exists pg_walinspect');
  const db = await cluster.database('walprobe');
  const secrets = await sluiceSecrets();
  const config = loadConfig({ ...secrets.env(db.url), SLUICE_DISPATCH_PARALLELISM: '64' });
  const keyring = await loadKeyring(config.signingKeys);
  await migrateDatabase(db.url);
  const producer = openPgDb(db.url, 2);
  const tasks = Array.from({ length: n }, (_, i) =>
    newTask({
      queue: 'bench',
      url: 'http://127.0.0.1:1/noop',
      body: JSON.stringify({ i, key: values.keyed ? `k${i % 100}` : null, seq: i }),
      concurrencyKey: values.keyed ? `k${i % 100}` : null,
      concurrencyLimit: values.keyed ? 1 : null,
      dedupKey: dedupKeys ? `order-${i}` : null,
      dedupTtlMs,
    }),
  );
  for (let i = 0; i < n; i += 500) await taskInsertMany(producer, tasks.slice(i, i + 500));
  await db.settle();
  const [{ lsn: start }] = (await cluster.admin.query<{ lsn: string }>('select pg_current_wal_lsn()::text as lsn')).rows as [
    { lsn: string },
  ];
  const dispatcherDb = openPgDb(db.url, 17);
  const OK: PushResult = { kind: 'response', status: 200, headers: {}, body: '', durationMs: 0 };
  let done = 0;
  while (done < n) {
    const r = await dispatchRun({ db: dispatcherDb, config, keyring, push: async () => OK }, { budgetMs: 30_000 });
    done += r.succeeded;
    if (r.claimed === 0) await new Promise((res) => setTimeout(res, 5));
  }
  await dispatcherDb.close();
  const [{ lsn: end }] = (await cluster.admin.query<{ lsn: string }>('select pg_current_wal_lsn()::text as lsn')).rows as [{ lsn: string }];
  const rows = (
    await cluster.admin.query<{ t: string; c: number; rec: number; fpi: number }>(
      `select "resource_manager/record_type" as t, count::float8 as c, record_size::float8 as rec, fpi_size::float8 as fpi
       from pg_get_wal_stats($1::pg_lsn, $2::pg_lsn, true) where count > 0 order by record_size + fpi_size desc`,
      [start, end],
    )
  ).rows;
  let total = 0;
  for (const r of rows) total += r.rec + r.fpi;
  const dedup = dedupKeys ? `, each with a dedup key${dedupTtlMs === null ? '' : ` kept ${dedupTtlMs} ms`}` : '';
  console.log(`${n} tasks${values.keyed ? ' (keyed)' : ''}${dedup}: ${(total / n).toFixed(0)} WAL bytes/task`);
  for (const r of rows.slice(0, 20)) {
    console.log(
      `${r.t.padEnd(32)} ${(r.c / n).toFixed(3).padStart(8)} rec/task ${(r.rec / n).toFixed(0).padStart(6)} B ${(r.fpi / n).toFixed(0).padStart(6)} B fpi`,
    );
  }
  // Which relations took the FPIs.
  const rels = (
    await cluster.admin.query<{ rel: string; fpi: number; rec: number }>(
      `select coalesce(c.relname, b.relfilenode::text) as rel, sum(coalesce(length(b.block_fpi_data),0))::float8 as fpi, sum(length(b.block_data))::float8 as rec
       from pg_get_wal_block_info($1::pg_lsn, $2::pg_lsn) b
       left join pg_class c on c.relfilenode = b.relfilenode
       group by 1 order by 2 desc limit 15`,
      [start, end],
    )
  ).rows;
  await producer.close();
  const named = await (async () => {
    const p = db.pool;
    const m = new Map<string, string>();
    for (const r of (await p.query<{ f: string; n: string }>('select relfilenode::text as f, relname as n from pg_class')).rows)
      m.set(r.f, r.n);
    return m;
  })();
  for (const r of rels)
    console.log(
      `  ${(named.get(r.rel) ?? r.rel).padEnd(30)} fpi ${(r.fpi / n).toFixed(0).padStart(6)} B/task  data ${(r.rec / n).toFixed(0).padStart(6)} B/task`,
    );
  await db.drop();
} finally {
  await cluster.stop();
}
