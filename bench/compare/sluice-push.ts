/**
 * Sluice whole: `node src/node/serve.ts` (what `npm run serve` runs) as a child process, tasks
 * enqueued over its HTTP API, pushed signed over HTTP to a no-op endpoint in this process. The
 * queue is paused while enqueuing; resuming it starts the clock, and it stops once every task is
 * `succeeded` in the database (the endpoint's count says when to start looking).
 */
import type { ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { DEFAULT_PARALLELISM } from '../../src/config.ts';
import { migrateDatabase } from '../../src/node/migrations.ts';
import { freePort } from '../../src/node/postgres.ts';
import { BIN, spawnReady } from '../../test/helpers/process.ts';
import { type Database, PROBE } from './cluster.ts';
import { type BenchJob, batches, type Contender, type Handler, IN_FLIGHT } from './contender.ts';
import { prefillFinished, QUEUE, type SluiceSecrets } from './sluice-common.ts';

/** The no-op endpoint: reads the body (the job), runs the harness's handler, answers 200. */
export interface Endpoint {
  url: string;
  handler: Handler | null;
  close(): Promise<void>;
}

export async function startEndpoint(): Promise<Endpoint> {
  const endpoint: Endpoint & { server?: Server } = { url: '', handler: null, close: async () => {} };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const job = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as BenchJob;
      (endpoint.handler?.handle(job) ?? Promise.resolve()).then(() => res.writeHead(200).end());
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  endpoint.url = `http://127.0.0.1:${(server.address() as { port: number }).port}/noop`;
  endpoint.close = () => new Promise((r) => server.close(() => r()));
  return endpoint;
}

const GIVE_UP_MS = 600_000;
const WARMUP = 5_000;
const WARMUP_QUEUE = 'warmup';

async function warmUp(db: Database, post: (path: string, body: unknown, status?: number) => Promise<void>, endpoint: Endpoint) {
  const jobs = Array.from({ length: WARMUP }, (_, i): BenchJob => ({ i: -1 - i, key: null, seq: -1 - i }));
  for (const batch of batches(jobs)) {
    await post('/v1/tasks/batch', { tasks: batch.map((job) => ({ url: endpoint.url, queue: WARMUP_QUEUE, body: job })) }, 201);
  }
  const until = Date.now() + GIVE_UP_MS;
  const count = `select count(*)::int as n, 1 as ${PROBE} from sluice.finished where queue = $1`;
  while (((await db.pool.query<{ n: number }>(count, [WARMUP_QUEUE])).rows[0]?.n ?? 0) < WARMUP) {
    if (Date.now() > until) throw new Error(`Sluice push: the warm-up did not finish in ${GIVE_UP_MS} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
  // Its rows go, so that the timed run starts on the tables it would have had.
  await db.pool.query(`delete from sluice.finished where queue = $1`, [WARMUP_QUEUE]);
  await db.pool.query(`delete from sluice.lanes where queue = $1`, [WARMUP_QUEUE]);
  await db.pool.query(`vacuum sluice.tasks`);
}

/** `inFlight`: pushes in flight; `null` = Sluice's Node default (SLUICE_DISPATCH_PARALLELISM unset). */
export function sluicePush(secrets: SluiceSecrets, endpoint: Endpoint, inFlight: number | null = IN_FLIGHT): Contender {
  return {
    id: inFlight === null ? 'Sp' : `Sp${inFlight}`,
    kind: 'Sluice push',
    inFlight: inFlight ?? DEFAULT_PARALLELISM.node,
    label: `Sluice push (npm run serve, HTTP, ${inFlight ?? 'default 64'} in flight)`,
    config: `src/node/serve.ts child process, SLUICE_DISPATCH_PARALLELISM ${inFlight ?? 'unset (Node default 64)'}, claim batch default (100), Ed25519-signed pushes to a local node:http endpoint answering 200; keyed: concurrency_limit 1 per task; enqueue with POST /v1/tasks/batch, 500 a call, Prefer: return=minimal, queue paused, resume starts the clock; each fresh server warmed first with ${WARMUP} tasks enqueued and pushed in a queue of their own, then removed`,
    role: 'sluice',
    async open(db, { keyed, finished }) {
      await migrateDatabase(db.url);
      await prefillFinished(db, finished);
      const port = await freePort();
      const server: ChildProcess = await spawnReady(
        `${BIN}/node`,
        ['src/node/serve.ts'],
        { ...secrets.env(db.url), ...(inFlight === null ? {} : { SLUICE_DISPATCH_PARALLELISM: String(inFlight) }), PORT: String(port) },
        'sluice: listening on',
      );
      const base = `http://127.0.0.1:${port}`;
      const post = async (path: string, body: unknown, status = 200) => {
        const res = await fetch(`${base}${path}`, {
          method: 'POST',
          // The bulk path reads back ids only (the batch's 201 says every task was written).
          headers: { authorization: `Bearer ${secrets.apiKey}`, 'content-type': 'application/json', prefer: 'return=minimal' },
          body: JSON.stringify(body),
        });
        const text = await res.text();
        if (res.status !== status) throw new Error(`POST ${path}: ${res.status} ${text.slice(0, 300)}`);
      };
      const task = (job: BenchJob) => ({
        url: endpoint.url,
        queue: QUEUE,
        body: job,
        ...(job.key === null ? {} : { concurrency_key: job.key, ...(keyed ? { concurrency_limit: 1 } : {}) }),
      });
      // A server that has been running, as the peers' code in this process has: a warm-up of
      // WARMUP tasks in a queue of its own, enqueued as the timed run enqueues and pushed to the
      // same endpoint, then removed. Without it the timed enqueue ran in a fresh process's
      // first second (cold JIT, no prepared statements): 22,600/s against ~27,000 once warm.
      await warmUp(db, post, endpoint);
      const succeeded = async () => {
        const [row] = (
          await db.pool.query<{ n: number }>(
            `select count(*)::int as n, 1 as ${PROBE} from sluice.finished where queue = $1 and status = 'succeeded'`,
            [QUEUE],
          )
        ).rows;
        return row?.n ?? 0;
      };
      return {
        cpu: { pid: server.pid as number },
        async enqueue(jobs) {
          await post(`/v1/queues/${QUEUE}/pause`, {});
          for (const batch of batches(jobs)) await post('/v1/tasks/batch', { tasks: batch.map(task) }, 201);
        },
        async enqueueOne(job) {
          await post('/v1/tasks', task(job), 201);
        },
        async start(handler, expected) {
          endpoint.handler = handler;
          // After a latency probe the queue was never paused; resuming then changes nothing.
          await post(`/v1/queues/${QUEUE}/resume`, {});
          return {
            async settled() {
              const until = Date.now() + GIVE_UP_MS;
              for (let n = await succeeded(); n < expected; n = await succeeded()) {
                if (Date.now() > until) throw new Error(`Sluice push: ${n} of ${expected} succeeded after ${GIVE_UP_MS} ms`);
                await new Promise((r) => setTimeout(r, 5));
              }
            },
            async stop() {
              endpoint.handler = null;
            },
          };
        },
        async close() {
          const exited = new Promise((r) => server.once('exit', r));
          server.kill('SIGTERM');
          await exited;
        },
      };
    },
  };
}
