/**
 * Backpressure through the real Worker in workerd (migrations/0016_levels.sql): an adaptive
 * queue learns to stay near what its endpoint takes, a Retry-After holds its key (and its
 * origin), woken by the scheduler's alarm (the cron never fires here), and a debounced burst is
 * pushed once.
 */
import { describe, expect, it } from 'vitest';
import { useWorkerFixture } from '../helpers/worker-fixture.ts';

const f = useWorkerFixture(() => ({
  SLUICE_QUEUES: JSON.stringify({ cap: { concurrency: 64, adaptive: true }, keyed: {} }),
}));

async function enqueueBatch(tasks: object[]) {
  const res = await fetch(`${f.worker.url}/v1/tasks/batch`, {
    method: 'POST',
    headers: { authorization: `Bearer ${f.secrets.apiKey}`, 'content-type': 'application/json', prefer: 'return=minimal' },
    body: JSON.stringify({ tasks }),
  });
  expect(res.status).toBe(201);
}

const finished = async (queue: string) =>
  (
    await f.t.db.query<{ n: number }>(`select count(*)::int as n from sluice.all_tasks where queue = $1 and status = 'succeeded'`, [queue])
  )[0]!.n;

describe('backpressure on the Worker', () => {
  it('an adaptive queue of 64 learns to stay near C = 4: every task succeeds on its first attempt', async () => {
    const seen = { inFlight: 0, over: 0, ok: 0 };
    f.endpoint.reply(async () => {
      if (seen.inFlight >= 4) {
        seen.over++;
        return { status: 429, body: 'slow down' };
      }
      seen.inFlight++;
      await new Promise((r) => setTimeout(r, 30));
      seen.inFlight--;
      seen.ok++;
      return { status: 200 };
    });
    await enqueueBatch(Array.from({ length: 200 }, (_, n) => ({ queue: 'cap', url: `${f.endpoint.url}/cap`, body: { n } })));
    await expect.poll(() => finished('cap'), { timeout: 60_000, interval: 200 }).toBe(200);
    const attempts = await f.t.db.query<{ attempts: number; n: number }>(
      `select attempts, count(*)::int as n from sluice.all_tasks where queue = 'cap' group by 1`,
    );
    expect(attempts).toEqual([{ attempts: 1, n: 200 }]);
    expect(seen.over).toBeGreaterThan(0);
    const [level] = await f.t.db.query<{ effective: number }>(`select effective from sluice.levels where queue = 'cap' and lane = '*'`);
    console.info(`worker: C = 4, 200 pushes answered 200, ${seen.over} answered 429, learnt limit ${level?.effective}`);
    expect(level?.effective).toBeLessThan(16);
    // What it learnt is shown with the level: the configured limit, the one in force, and why.
    const res = await fetch(`${f.worker.url}/v1/queues/cap/concurrency`, { headers: { authorization: `Bearer ${f.secrets.apiKey}` } });
    const view = (await res.json()) as {
      adaptive: boolean;
      queue_level: { limit: number; effective: number; last_move: { reason: string } };
    };
    expect(view.adaptive).toBe(true);
    expect(view.queue_level).toMatchObject({ limit: 64, effective: level!.effective });
    expect(view.queue_level.last_move.reason).toMatch(/^(lowered: HTTP 429|raised: a window of successes)$/);
  });

  // Key b's task goes to the same origin as key a's, so the origin's hold keeps it waiting too (a
  // Retry-After holds its origin and its key: test/worker/endpoints.test.ts holds the keys apart).
  it("Retry-After: 1 from one task holds its key (and its origin) for a second: the key's later pushes begin after it", async () => {
    let first = true;
    f.endpoint.reply((push) => {
      if (push.path === '/a' && first) {
        first = false;
        return { status: 429, headers: { 'retry-after': '1' } };
      }
      return { status: 200 };
    });
    await enqueueBatch([
      { queue: 'keyed', url: `${f.endpoint.url}/a`, concurrency_key: 'a', concurrency_limit: 1, body: { n: 1 } },
      { queue: 'keyed', url: `${f.endpoint.url}/a`, concurrency_key: 'a', concurrency_limit: 1, body: { n: 2 } },
    ]);
    const held = async () =>
      (await f.t.db.query<{ until: Date }>(`select held_until as until from sluice.levels where queue = 'keyed' and lane = 'k:a'`))[0]
        ?.until;
    const until = await expect.poll(held, { timeout: 10_000 }).toBeTruthy().then(held);
    await enqueueBatch([{ queue: 'keyed', url: `${f.endpoint.url}/b`, concurrency_key: 'b', body: { n: 3 } }]);
    await expect.poll(() => finished('keyed'), { timeout: 15_000, interval: 100 }).toBe(3);
    // On the database's clock, as the hold was set: every later push of key a began once the
    // hold had ended.
    const starts = await f.t.db.query<{ key: string; n: number; at: Date }>(
      `select t.concurrency_key as key, a.attempt as n, a.started_at as at
       from sluice.all_attempts a join sluice.all_tasks t on t.id = a.task_id where t.queue = 'keyed' order by a.started_at`,
    );
    const holdEnd = new Date(until!).getTime();
    const laterA = starts
      .filter((s) => s.key === 'a')
      .slice(1)
      .map((s) => new Date(s.at).getTime());
    expect(laterA.length).toBeGreaterThanOrEqual(2);
    for (const at of laterA) expect(at).toBeGreaterThanOrEqual(holdEnd);
    const b = new Date(starts.find((s) => s.key === 'b')!.at).getTime();
    console.info(
      `worker: key a held until ${until!.toISOString()}, pushed again ${Math.min(...laterA) - holdEnd} ms after; key b, of the same origin, pushed ${b - holdEnd} ms after`,
    );
  });

  it('a debounced burst of enqueues is pushed once, with the last body', async () => {
    f.endpoint.reply(() => ({ status: 200 }));
    const ids = new Set<string>();
    for (let v = 1; v <= 5; v++) {
      const res = await fetch(`${f.worker.url}/v1/tasks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${f.secrets.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ queue: 'keyed', url: `${f.endpoint.url}/burst`, body: { v }, debounce: { key: 'doc', period_ms: 300 } }),
      });
      expect(res.status).toBe(v === 1 ? 201 : 200);
      ids.add(((await res.json()) as { id: string }).id);
    }
    expect(ids.size).toBe(1);
    const [id] = [...ids];
    await expect
      .poll(async () => (await f.t.db.query<{ status: string }>('select status from sluice.all_tasks where id = $1', [id]))[0]?.status, {
        timeout: 10_000,
      })
      .toBe('succeeded');
    const pushes = f.endpoint.received.filter((p) => p.path === '/burst');
    expect(pushes.map((p) => JSON.parse(p.text))).toEqual([{ v: 5 }]);
  });
});
