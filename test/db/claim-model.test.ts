/** The claim statement against its model: on random states, Postgres claims exactly what the model says. */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { taskClaimBatch } from '../../src/db/claim.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { keyLimitPut, queueOverridePatch } from '../../src/db/queues.ts';
import { NOW, scenario } from '../helpers/claim-arbitraries.ts';
import { type ModelState, planClaim } from '../helpers/claim-model.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { newTask } from '../helpers/tasks.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(() => t.drop());

/** Writes the scenario into Postgres; returns the model of what Postgres now holds. */
async function load(state: ModelState): Promise<ModelState> {
  await t.db.query(
    'truncate sluice.tasks, sluice.finished, sluice.attempts, sluice.lanes, sluice.queues, sluice.key_limits, sluice.rate_grants cascade',
  );
  const clock = Date.now();
  // Model time NOW is the database's now: shift run_at by the same offset.
  const at = (ms: number) => new Date(clock + (ms - NOW));
  const ids = new Map<number, string>();
  for (const m of state.tasks) {
    const lane = state.lanes.find((l) => l.queue === m.queue && l.key === m.key)!;
    const [r] = await taskInsertMany(t.db, [
      newTask({
        queue: m.queue,
        concurrencyKey: m.key,
        priority: m.priority,
        runAt: at(m.runAt),
        concurrencyLimit: m.key === null ? null : lane.taskLimit,
      }),
    ]);
    ids.set(m.id, r!.task.id);
  }
  const leased = state.tasks.filter((m) => m.status === 'leased').map((m) => ids.get(m.id)!);
  await t.db.query(
    `update sluice.tasks set status = 'leased', attempts = 1, lease_id = gen_random_uuid(), leased_at = now(), lease_expires_at = now() + interval '1 minute'
     where id = any($1::bigint[])`,
    [leased],
  );
  // Waiting tasks, with the slots they lent; one whose children are not all finished has one
  // unfinished child, not due, in a queue the scenario does not claim from.
  for (const m of state.tasks.filter((x) => x.status === 'waiting')) {
    const id = ids.get(m.id)!;
    await t.db.query(`update sluice.tasks set status = 'waiting', attempts = 1, lent_queue = $2, lent_key = $3 where id = $1`, [
      id,
      m.wait!.lentQueue,
      m.wait!.lentKey,
    ]);
    if (m.wait!.childrenOpen) {
      await taskInsertMany(t.db, [newTask({ queue: 'children', parentId: id, runAt: at(NOW + 3_600_000) })]);
    }
  }
  for (const [queue, settings] of Object.entries(state.overrides)) await queueOverridePatch(t.db, queue, settings);
  // Grants still inside their period: each holds room at its level until a minute from now.
  for (const [at, n] of Object.entries(state.grants)) {
    const [queue, lane] = at.split('/') as [string, string];
    await t.db.query(
      `insert into sluice.rate_grants (queue, lane, granted, until)
       select $1, $2, now(), now() + interval '1 minute' from generate_series(1, $3::int)`,
      [queue, lane, n],
    );
  }
  for (const [queue, keys] of Object.entries(state.keyOverrides)) {
    for (const [key, limit] of Object.entries(keys)) await keyLimitPut(t.db, queue, key, limit);
  }
  // Round-robin marks as the scenario has them; hints exact, as a claim leaves them.
  for (const lane of state.lanes) {
    await t.db.query(`update sluice.lanes set served = $3 where queue = $1 and lane = $2`, [
      lane.queue,
      lane.key === null ? '' : `k:${lane.key}`,
      lane.served,
    ]);
  }
  await t.db.query('select sluice.lanes_recompute(array(select id from sluice.lanes))');
  // Read back what the model needs: ids and lane rows as Postgres numbered them.
  const laneRows = await t.db.query<{ id: string; queue: string; lane: string; served: string; task_limit: number | null }>(
    'select * from sluice.lanes',
  );
  return {
    ...state,
    now: clock,
    tasks: state.tasks.map((m) => ({ ...m, id: Number(ids.get(m.id)), runAt: at(m.runAt).getTime() })),
    lanes: laneRows.map((r) => ({
      id: Number(r.id),
      queue: r.queue,
      key: r.lane === '' ? null : r.lane.slice(2),
      served: Number(r.served),
      taskLimit: r.task_limit,
    })),
  };
}

describe('sluice.claim', () => {
  it('claims exactly the tasks the model claims', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async ({ state, max }) => {
        const loaded = await load(state);
        const claimed = await taskClaimBatch(t.db, { max, clusterCap: state.clusterCap, queuesJson: JSON.stringify(state.env) });
        const expected = planClaim({ ...loaded, now: Date.now() }, max);
        expect(claimed.map((c) => Number(c.id)).sort((a, b) => a - b)).toEqual([...expected].sort((a, b) => a - b));
      }),
      { numRuns: 60 },
    );
  });

  it('is checked on scenarios that exercise the limits: claims happen, and some are held back', () => {
    // Postgres claims what the model claims (above), so the scenarios' coverage is the model's,
    // counted on a fixed sample: on 60 random runs the total claimed falls under 30 one time in
    // twenty (measured over 300 seeds), which made a check of the runs themselves flaky.
    const sample = fc.sample(scenario, { seed: 20_261_123, numRuns: 200 });
    let claimed = 0;
    let limited = 0;
    let byRate = 0;
    let byWaits = 0;
    let resumed = 0;
    const noRates = (o: ModelState['env']) =>
      Object.fromEntries(Object.entries(o).map(([q, v]) => [q, { ...v, rate: undefined, key_rate: undefined }]));
    for (const { state, max } of sample) {
      const planned = planClaim({ ...state, now: NOW }, max).length;
      claimed += planned;
      if (planned < state.tasks.filter((m) => m.status === 'pending' && m.runAt <= NOW).length) limited++;
      const unrated = planClaim(
        { ...state, env: noRates(state.env), overrides: noRates(state.overrides), grants: {}, now: NOW },
        max,
      ).length;
      if (planned < unrated) byRate++;
      // Waiting tasks that held slots others would have taken, and resumed ones that were claimed.
      const lending = state.tasks.map((m) => (m.wait ? { ...m, wait: { ...m.wait, lentQueue: true, lentKey: true } } : m));
      const unheld = planClaim({ ...state, tasks: lending, now: NOW }, max).length;
      if (planned < unheld) byWaits++;
      const ids = new Set(planClaim({ ...state, now: NOW }, max));
      if (state.tasks.some((m) => m.status === 'waiting' && ids.has(m.id))) resumed++;
    }
    expect(claimed).toBeGreaterThan(sample.length / 2);
    expect(limited).toBeGreaterThan(sample.length / 4);
    // Rates bind in some of them (30 of these 200): claims a rate held back that nothing else would.
    expect(byRate).toBeGreaterThanOrEqual(5);
    // Waiting tasks hold slots another task would have taken (9 of these 200), and resumed
    // ones are claimed again (71).
    expect(byWaits).toBeGreaterThanOrEqual(5);
    expect(resumed).toBeGreaterThanOrEqual(5);
  });
});
