/**
 * `npm run test:soak`: load and soak on the Node path. 100,000 items through one Sluice server
 * (`node src/node/serve.ts`) under a cluster cap and key limits, enqueued through the API at a
 * steady pace, with the server's memory (RSS) and the tables' sizes sampled every 2 s; then the
 * fault matrix's checker (nothing lost, no duplicate, no lease left). Then overload: a burst of
 * concurrent enqueues far beyond what the server takes at once, each of which must be answered
 * 201, or 429/503 with Retry-After: never another 5xx, never a hang.
 *
 *   npm run test:soak -- --tasks 100000 --burst 2000
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { checkHistory } from './matrix/checker.ts';
import { startCluster } from './matrix/cluster.ts';
import { startFaultEndpoint } from './matrix/endpoint.ts';
import { produce } from './matrix/producer.ts';
import { collect, drained, until } from './matrix/scenario.ts';
import { runSecrets, startMatrixPostgres } from './matrix/setup.ts';

const { values } = parseArgs({
  options: {
    tasks: { type: 'string', default: '100000' },
    burst: { type: 'string', default: '2000' },
    'burst-batch': { type: 'string', default: '100' },
  },
});
const ITEMS = Number(values.tasks);
const BURST = Number(values.burst);
const BURST_BATCH = Number(values['burst-batch']);
const LIMITS = { cluster: 64, queues: { soak: { key_concurrency: 2 } } };
const lines: string[] = [];
const say = (line: string) => {
  lines.push(line);
  console.log(line);
};
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

const postgres = await startMatrixPostgres();
const { env, apiKey } = await runSecrets(postgres.db.url);
const cluster = await startCluster(
  postgres.db,
  {
    ...env,
    SLUICE_CLUSTER_CAP: String(LIMITS.cluster),
    // The burst's tasks go to a paused queue: they are counted, not pushed.
    SLUICE_QUEUES: JSON.stringify({ ...LIMITS.queues, burst: { paused: true } }),
  },
  { direct: true },
);
const endpoint = await startFaultEndpoint({ sluiceUrl: () => cluster.anyUrl() });
endpoint.behave(() => ({ kind: 'ok', ms: 2 }));
let failed = false;
try {
  const server = await cluster.start();
  const pid = server.child.pid!;

  interface Sample {
    at: number;
    done: number;
    rssBytes: number;
    tasksBytes: number;
    historyBytes: number;
  }
  const samples: Sample[] = [];
  const started = Date.now();
  const sample = async () => {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    // The hot table with the live attempts; history is the sum of its buckets' tables.
    const { rows } = await cluster.admin.query<{ tasks: string; history: string }>(
      `select (pg_total_relation_size('sluice.tasks') + pg_total_relation_size('sluice.attempts'))::text as tasks,
              (select coalesce(sum(pg_total_relation_size(relid)), 0) from pg_partition_tree('sluice.finished'))::text as history`,
    );
    samples.push({
      at: (Date.now() - started) / 1_000,
      done: endpoint.doneCount(),
      rssBytes: rssKb * 1024,
      tasksBytes: Number(rows[0]!.tasks),
      historyBytes: Number(rows[0]!.history),
    });
  };
  const sampling = setInterval(() => void sample().catch(() => {}), 2_000);

  say(
    `# Sluice soak, ${new Date().toISOString()}\n\n${ITEMS.toLocaleString('en')} items, one Node server, cluster cap ${LIMITS.cluster}, 2 per key over 50 keys\n`,
  );
  const producer = produce({
    items: ITEMS,
    batch: 1_000,
    intervalMs: 1_000,
    apiKey,
    url: () => server.url,
    task: (i) => ({ url: `${endpoint.url}/work`, queue: 'soak', concurrency_key: `k${i % 50}` }),
    deadlineMs: 3_600_000,
  });
  const produced = await producer.done;
  await until(`${ITEMS} items drained`, () => drained(cluster.admin, ITEMS), 3_600_000);
  await sample();
  clearInterval(sampling);
  const drainS = (Date.now() - started) / 1_000;

  const verdict = checkHistory({
    ...(await collect(cluster.admin, endpoint)),
    acked: produced.acked,
    resent: produced.resent,
    fault: null,
    limits: LIMITS,
  });
  say(
    `drained in ${drainS.toFixed(0)} s (${Math.round(ITEMS / drainS)} items/s); lost ${verdict.lost}, duplicates ${verdict.duplicates}, leased at rest ${verdict.leasedAtRest}; peaks ${verdict.peaks.map((p) => `${p.level} ${p.peak}/${p.limit}`).join(', ')}`,
  );
  if (!verdict.ok) {
    failed = true;
    say(`FAILED: ${verdict.problems.join('; ')}`);
  }

  // Memory after warm-up (the first fifth of the items): flat means the last samples are not
  // above the warm ones by more than noise (a leak of even 1 KiB per task would add ~100 MiB).
  const warm = samples.filter((s) => s.done >= ITEMS / 5);
  const rss = warm.map((s) => s.rssBytes);
  const firstWarm = median(rss.slice(0, 5));
  const lastWarm = median(rss.slice(-5));
  say(`\n| s | items done | Sluice RSS | live (tasks, attempts) | history (finished) |\n|--:|--:|--:|--:|--:|`);
  const every = Math.max(1, Math.floor(samples.length / 15));
  for (const [i, s] of samples.entries()) {
    if (i % every !== 0 && i !== samples.length - 1) continue;
    say(`| ${s.at.toFixed(0)} | ${s.done.toLocaleString('en')} | ${mib(s.rssBytes)} | ${mib(s.tasksBytes)} | ${mib(s.historyBytes)} |`);
  }
  const growth = (lastWarm - firstWarm) / firstWarm;
  say(
    `\nRSS after warm-up: ${mib(firstWarm)} → ${mib(lastWarm)} at the end (${(growth * 100).toFixed(1)}%; min ${mib(Math.min(...rss))}, max ${mib(Math.max(...rss))})`,
  );
  if (growth > 0.25) {
    failed = true;
    say(`FAILED: RSS grew ${(growth * 100).toFixed(1)}% after warm-up`);
  }

  // Overload: a burst of concurrent enqueues, each answered in time with a status a client can act on.
  const body = JSON.stringify({
    tasks: Array.from({ length: BURST_BATCH }, () => ({ url: `${endpoint.url}/burst`, queue: 'burst' })),
  });
  const burstStarted = Date.now();
  const failures = new Set<string>();
  const answers = await Promise.all(
    Array.from({ length: BURST }, async () => {
      const t0 = performance.now();
      try {
        const res = await fetch(`${server.url}/v1/tasks/batch`, {
          method: 'POST',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          body,
          signal: AbortSignal.timeout(60_000),
        });
        await res.arrayBuffer();
        return { status: res.status, retryAfter: res.headers.get('retry-after'), ms: performance.now() - t0 };
      } catch (error) {
        const cause = (error as { cause?: { code?: string; message?: string } }).cause;
        failures.add(cause?.code ?? cause?.message ?? (error as Error).message);
        return { status: (error as Error).name === 'TimeoutError' ? -1 : 0, retryAfter: null, ms: performance.now() - t0 };
      }
    }),
  );
  const count = new Map<string, number>();
  for (const a of answers) {
    const key =
      a.status === -1 ? 'no answer in 60 s' : a.status === 0 ? 'connection failed' : `${a.status}${a.retryAfter ? ' + Retry-After' : ''}`;
    count.set(key, (count.get(key) ?? 0) + 1);
  }
  const ms = answers.map((a) => a.ms).sort((a, b) => a - b);
  say(
    `\nOverload: ${BURST} concurrent batch enqueues of ${BURST_BATCH} tasks (${(BURST * BURST_BATCH).toLocaleString('en')} tasks) in ${((Date.now() - burstStarted) / 1_000).toFixed(1)} s: ${[...count].map(([k, n]) => `${n} × ${k}`).join(', ')}; answered in p50 ${Math.round(ms[Math.floor(ms.length / 2)]!)} ms, p99 ${Math.round(ms[Math.floor(ms.length * 0.99)]!)} ms, max ${Math.round(ms.at(-1)!)} ms`,
  );
  if (failures.size > 0) say(`connection failures: ${[...failures].join(', ')}`);
  const bad = answers.filter((a) => !(a.status === 201 || ((a.status === 503 || a.status === 429) && a.retryAfter)));
  if (bad.length > 0) {
    failed = true;
    say(`FAILED: ${bad.length} answers were neither 201 nor 429/503 with Retry-After`);
  }
  const written = await cluster.admin.query<{ n: number }>(`select count(*)::int as n from sluice.all_tasks where queue = 'burst'`);
  const accepted = answers.filter((a) => a.status === 201).length * BURST_BATCH;
  say(`burst tasks in the database: ${written.rows[0]!.n.toLocaleString('en')} (accepted ${accepted.toLocaleString('en')})`);
  if (written.rows[0]!.n !== accepted) {
    failed = true;
    say('FAILED: the burst tasks written are not the ones acknowledged');
  }
} finally {
  await endpoint.close();
  await cluster.close();
  await postgres.close();
}

const dir = new URL('./results/', import.meta.url);
await mkdir(dir, { recursive: true });
const file = new URL(`soak-${new Date().toISOString().replace(/[:.]/g, '-')}.md`, dir);
await writeFile(file, `${lines.join('\n')}\n`);
console.log(`\nwritten to ${file.pathname}`);
process.exit(failed ? 1 : 0);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? 0;
}
