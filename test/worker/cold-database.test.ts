/**
 * A cold database (docs/operations.md "A cold database"): Neon suspends an idle compute,
 * closing its connections, and resumes it at the next connection in a few hundred ms to a
 * few seconds. Here the stand-in suspends Postgres with tasks delayed, leased and being
 * enqueued, and holds every new connection for 5 s. On the real Worker in workerd and on the
 * Node server: every enqueue is answered 201 or 503 with Retry-After (which a client follows),
 * never 500; every task is pushed, once; dispatch resumes by itself, with no cron.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { type RunningDelay, startTcpDelay } from '../../src/node/tcp-delay.ts';
import { testEnv } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { useWorkerFixture } from '../helpers/worker-fixture.ts';

const HOLD_MS = 5_000;
const f = useWorkerFixture();

interface Path {
  base: string;
  /** Suspends the database: connections cut, new ones held HOLD_MS. */
  suspend(): void;
  db: TestDatabase['db'];
}

/** Enqueues as a client would: a 503 is tried again after its Retry-After; any other answer is returned. */
async function enqueue(base: string, body: unknown, answers: string[]): Promise<string[]> {
  const path = Array.isArray(body) ? '/v1/tasks/batch' : '/v1/tasks';
  for (;;) {
    const res = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${f.secrets.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(Array.isArray(body) ? { tasks: body } : body),
    });
    const answer = (await res.json()) as { id?: string; tasks?: { id: string }[]; code?: string };
    answers.push(
      res.status === 503 ? `503 ${res.headers.get('retry-after') === null ? 'without' : 'with'} Retry-After` : String(res.status),
    );
    if (res.status === 503 && res.headers.get('retry-after') !== null) {
      await new Promise((r) => setTimeout(r, Number(res.headers.get('retry-after')) * 1000));
      continue;
    }
    expect(res.status, JSON.stringify(answer)).toBe(201);
    return answer.tasks ? answer.tasks.map((t) => t.id) : [answer.id as string];
  }
}

async function exercise(path: Path, label: string) {
  const url = (n: number) => `${f.endpoint.url}/cold/${label}/${n}`;
  // Warm: the API's and the shards' connections are open.
  const warm = await enqueue(path.base, { url: url(0) }, []);
  // Due in the cold, and held by the endpoint across the suspension (its lease open).
  f.endpoint.reply((push) => (push.path.endsWith('/1') ? { status: 200, delayMs: 1_500 } : { status: 200 }));
  const ids = [
    ...warm,
    ...(await enqueue(path.base, { url: url(1) }, [])),
    ...(await enqueue(path.base, { url: url(2), delay_ms: 1_000 }, [])),
  ];
  await new Promise((r) => setTimeout(r, 300));

  const suspendedAt = Date.now();
  path.suspend();
  const answers: string[] = [];
  const during = await Promise.all([
    ...Array.from({ length: 8 }, (_, i) => enqueue(path.base, { url: url(10 + i) }, answers)),
    enqueue(
      path.base,
      Array.from({ length: 10 }, (_, i) => ({ url: url(20 + i) })),
      answers,
    ),
  ]);
  ids.push(...during.flat());
  // The suspension was in force: nothing was answered 201 before the database resumed.
  expect(Date.now() - suspendedAt).toBeGreaterThanOrEqual(HOLD_MS - 50);
  console.info(`${label}: enqueues during a ${HOLD_MS} ms cold start answered ${JSON.stringify(answers)}`);
  expect(answers.every((a) => a === '201' || a === '503 with Retry-After')).toBe(true);

  // Every task pushed and finished, by dispatch alone (no cron, no poke after the enqueues).
  await expect
    .poll(
      async () => {
        const rows = await path.db.query<{ status: string }>('select status from sluice.all_tasks where id = any($1::bigint[])', [ids]);
        return rows.filter((r) => r.status === 'succeeded').length;
      },
      { timeout: 30_000, interval: 200 },
    )
    .toBe(ids.length);
  const pushes = f.endpoint.received.filter((p) => p.path.startsWith(`/cold/${label}/`));
  const perTask = new Map<string, number>();
  for (const p of pushes) perTask.set(String(p.headers['sluice-task-id']), (perTask.get(String(p.headers['sluice-task-id'])) ?? 0) + 1);
  const twice = [...perTask].filter(([, n]) => n > 1);
  // The task held across the suspension may have been pushed again once its lease was reaped:
  // that is its cause. Any other is not.
  const held = pushes.find((p) => p.path.endsWith('/1'))?.headers['sluice-task-id'];
  expect(twice.filter(([id]) => id !== held)).toEqual([]);
  expect(perTask.size).toBe(ids.length);
  f.endpoint.reply(() => ({ status: 200 }));
}

describe('a cold database', () => {
  it('on the Worker: nothing lost, no 500, dispatch resumes by itself', async () => {
    await exercise({ base: f.worker.url, db: f.t.db, suspend: () => f.proxy.suspend(HOLD_MS) }, 'worker');
  }, 60_000);

  describe('on the Node server', () => {
    let t: TestDatabase;
    let relay: RunningDelay;
    let node: NodeSluice;
    beforeAll(async () => {
      t = await createTestDatabase();
      relay = await startTcpDelay({ host: '127.0.0.1', port: inject('pgPort') }, 0);
      const through = new URL(t.url);
      through.port = String(relay.port);
      node = await startNodeSluice({ env: testEnv(f.secrets, through.href) });
    });
    afterAll(async () => {
      await node?.close();
      await relay?.close();
      await t?.drop();
    });

    it('does the same', async () => {
      await exercise({ base: node.url, db: t.db, suspend: () => relay.suspend(HOLD_MS) }, 'node');
    }, 60_000);
  });
});
