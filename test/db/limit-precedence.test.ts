/**
 * The limit precedence has three homes that must agree (issue 21): the claim applies it inline
 * (migrations/functions/claim.sql), a wait's decision through `sluice.queue_limit` and
 * `sluice.lane_limit` (functions/waits.sql), and the API and dashboard through core/limits.ts.
 * For every combination of where a queue's and a key's limit can come from (the environment, a
 * run-time override, a key override, the first task's `concurrency_limit`, or nowhere), the
 * three give the same limits, and the claim leases exactly that many of a key's due tasks.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { learntLimit, resolveKeyLimit, resolveQueueLimits } from '../../src/core/limits.ts';
import { taskClaimBatch } from '../../src/db/claim.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { keyLimitPut, queueOverridePatch } from '../../src/db/queues.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { newTask } from '../helpers/tasks.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

/** Tasks due in the key: more than any limit drawn below. */
const TASKS = 6;
/** A limit from one source: absent, or 1–5. */
const limit = fc.option(fc.integer({ min: 1, max: 5 }), { nil: null });

describe('limit precedence', () => {
  it('is the same in the claim, in the wait functions and in core/limits.ts, for every source', async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.record({ envQueue: limit, envKey: limit, overrideQueue: limit, overrideKey: limit, keyOverride: limit, taskLimit: limit }),
        async (c) => {
          const queue = `precedence-${++n}`;
          const key = 'k';
          const env = {
            ...(c.envQueue === null ? {} : { concurrency: c.envQueue }),
            ...(c.envKey === null ? {} : { key_concurrency: c.envKey }),
          };
          const queuesJson = JSON.stringify({ [queue]: env });
          if (c.overrideQueue !== null || c.overrideKey !== null) {
            await queueOverridePatch(t.db, queue, { concurrency: c.overrideQueue, key_concurrency: c.overrideKey });
          }
          if (c.keyOverride !== null) await keyLimitPut(t.db, queue, key, c.keyOverride);
          // The first task gives the key's limit, if it gives one.
          await taskInsertMany(
            t.db,
            Array.from({ length: TASKS }, (_, i) =>
              newTask({ queue, concurrencyKey: key, concurrencyLimit: i === 0 ? c.taskLimit : null, runAt: new Date(Date.now() - 60_000) }),
            ),
          );

          const override = { concurrency: c.overrideQueue ?? undefined, key_concurrency: c.overrideKey ?? undefined };
          const queueLimits = resolveQueueLimits(env, c.overrideQueue === null && c.overrideKey === null ? null : override);
          const expected = {
            queue: queueLimits.concurrency.value,
            key: resolveKeyLimit(key, c.keyOverride, c.taskLimit, queueLimits.keyConcurrency).value,
          };
          const [sql] = await t.db.query<{ queue: number | null; key: number | null }>(
            `select sluice.queue_limit($1, $2::jsonb) as queue,
                    sluice.lane_limit($1, (select lane from sluice.lanes where queue = $1 and lane <> ''), $2::jsonb) as key`,
            [queue, queuesJson],
          );
          expect(sql, JSON.stringify(c)).toEqual(expected);

          const claimed = await taskClaimBatch(t.db, { max: 100, clusterCap: null, queuesJson });
          const mine = claimed.filter((task) => task.queue === queue);
          expect(mine.length, JSON.stringify(c)).toBe(Math.min(expected.queue ?? TASKS, expected.key ?? TASKS, TASKS));
          // Nothing of this case is left for the next one to lease.
          await t.db.query('delete from sluice.tasks where queue = $1', [queue]);
        },
      ),
      { numRuns: 40 },
    );
  });
});

describe('the limit an adaptive level learnt', () => {
  it('is the same in the claim (sluice.learnt_limit) and in the API (core/limits.ts learntLimit)', async () => {
    const arg = fc.option(fc.integer({ min: 1, max: 50 }), { nil: null });
    // The claim's floor is never null: `adaptive_min`, 1 unless set.
    const cases = fc.sample(fc.tuple(arg, arg, fc.integer({ min: 1, max: 50 }), fc.integer({ min: 0, max: 60 })), 300);
    // One statement for every case: a round trip each would make the check slow, not stronger.
    const rows = await t.db.query<{ n: number; limit: number | null }>(
      `select c.n::integer as n, sluice.learnt_limit(c.l, c.learnt, c.floor, c.waiting) as limit
       from unnest($1::integer[], $2::integer[], $3::integer[], $4::integer[]) with ordinality as c(l, learnt, floor, waiting, n)
       order by c.n`,
      [cases.map((c) => c[0]), cases.map((c) => c[1]), cases.map((c) => c[2]), cases.map((c) => c[3])],
    );
    expect(rows).toHaveLength(cases.length);
    for (const [i, [limit, learnt, floor, waiting]] of cases.entries()) {
      expect(learntLimit(limit, learnt, floor, waiting), JSON.stringify({ limit, learnt, floor, waiting })).toBe(rows[i]!.limit);
    }
  });
});
