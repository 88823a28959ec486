/**
 * Rate limits through the real Worker in workerd: tasks held by a rate are pushed when it has
 * room again, woken by the scheduler's alarm (the cron never fires here), within the limit.
 */
import { describe, expect, it } from 'vitest';
import { useWorkerFixture } from '../helpers/worker-fixture.ts';

const RATE = { limit: 2, period_ms: 500 };
const BURST = { limit: 2, period_ms: 1_000, burst: 4 };
const f = useWorkerFixture(() => ({ SLUICE_QUEUES: JSON.stringify({ paced: { key_rate: RATE }, bursty: { rate: BURST } }) }));

describe('rate limits on the Worker', () => {
  it('push a key held by its rate when the rate has room again, without the cron', async () => {
    f.endpoint.reply(() => ({ status: 200 }));
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${f.worker.url}/v1/tasks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${f.secrets.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ queue: 'paced', url: `${f.endpoint.url}/w`, concurrency_key: 'acme', body: { i } }),
      });
      expect(res.status).toBe(201);
    }
    await f.endpoint.waitFor(5, 15_000);
    // On the claims' own clock (a push's arrival adds its delivery time): the fifth waited for
    // the third window, and no 500 ms held more than two.
    await expect.poll(async () => (await f.t.db.query('select 1 from sluice.all_attempts')).length).toBe(5);
    const rows = await f.t.db.query<{ s: Date }>('select started_at as s from sluice.all_attempts order by started_at');
    const times = rows.map((r) => new Date(r.s).getTime());
    const gap = times[4]! - times[0]!;
    expect(gap).toBeGreaterThanOrEqual(2 * RATE.period_ms);
    for (const a of times) expect(times.filter((x) => x >= a && x < a + RATE.period_ms).length).toBeLessThanOrEqual(RATE.limit);
    console.info(`worker: 5 tasks of one key at 2 per 500 ms pushed over ${gap} ms`);
  });

  it('a rate with a burst pushes the burst at once, then one per period / limit, woken by the alarm', async () => {
    f.endpoint.reply(() => ({ status: 200 }));
    const res = await fetch(`${f.worker.url}/v1/tasks/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${f.secrets.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ tasks: Array.from({ length: 6 }, (_, i) => ({ queue: 'bursty', url: `${f.endpoint.url}/b`, body: { i } })) }),
    });
    expect(res.status).toBe(201);
    await expect
      .poll(
        async () =>
          (await f.t.db.query(`select 1 from sluice.all_attempts a join sluice.all_tasks t on t.id = a.task_id where t.queue = 'bursty'`))
            .length,
        {
          timeout: 15_000,
        },
      )
      .toBe(6);
    // On the claims' clock: four in the first claim, the fifth and sixth T = 500 ms apart after it.
    const rows = await f.t.db.query<{ s: Date }>(
      `select a.started_at as s from sluice.all_attempts a join sluice.all_tasks t on t.id = a.task_id where t.queue = 'bursty' order by 1`,
    );
    const times = rows.map((r) => new Date(r.s).getTime() - new Date(rows[0]!.s).getTime());
    expect(times.slice(0, 4).every((ms) => ms === times[0])).toBe(true);
    expect(times[4]!).toBeGreaterThanOrEqual(500);
    expect(times[5]!).toBeGreaterThanOrEqual(1_000);
    console.info(`worker: 6 tasks at 2/s with a burst of 4 started at ${times.join(', ')} ms`);
  });
});
