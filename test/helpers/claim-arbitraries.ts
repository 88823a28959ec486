/** Random claim scenarios for property tests: queues, keys, limits, rates and their grants, leased, waiting and pending tasks. */
import fc from 'fast-check';
import type { QueueLimitSettings } from '../../src/core/limits.ts';
import type { ModelLane, ModelState, ModelTask } from './claim-model.ts';

const QUEUES = ['q1', 'q2', 'q3'];
const KEYS = [null, 'a', 'b', 'c', 'd', ''];

const limit = fc.option(fc.integer({ min: 1, max: 6 }), { nil: undefined });
/** A rate, now and then: at most 1–3 a minute (grants below use some of it up). */
const rate = fc.option(fc.record({ limit: fc.integer({ min: 1, max: 3 }), period_ms: fc.constant(60_000) }), { nil: undefined, freq: 3 });
const queueSettings: fc.Arbitrary<QueueLimitSettings> = fc.record({
  concurrency: limit,
  key_concurrency: limit,
  priority: fc.option(fc.integer({ min: -1, max: 1 }), { nil: undefined }),
  paused: fc.constantFrom(undefined, undefined, undefined, undefined, false, true),
  rate,
  key_rate: rate,
});

export const NOW = 1_000_000;

export const scenario: fc.Arbitrary<{ state: ModelState; max: number }> = fc
  .record({
    tasks: fc.array(
      fc.record({
        queue: fc.constantFrom(...QUEUES),
        key: fc.constantFrom(...KEYS),
        priority: fc.integer({ min: -1, max: 1 }),
        // Due (in the past) or clearly not (an hour ahead), never on the edge of the clock.
        runAt: fc.oneof(fc.integer({ min: NOW - 1_000, max: NOW - 1 }), fc.integer({ min: NOW + 3_600_000, max: NOW + 3_601_000 })),
        status: fc.constantFrom('pending', 'pending', 'leased', 'waiting'),
        wait: fc.record({ lentQueue: fc.boolean(), lentKey: fc.boolean(), childrenOpen: fc.boolean() }),
      }),
      { minLength: 5, maxLength: 60 },
    ),
    env: fc.dictionary(fc.constantFrom(...QUEUES), queueSettings),
    overrides: fc.dictionary(fc.constantFrom(...QUEUES), queueSettings, { maxKeys: 2 }),
    keyOverrides: fc.dictionary(fc.constantFrom(...QUEUES), fc.dictionary(fc.constantFrom('a', 'b', ''), fc.integer({ min: 1, max: 4 }))),
    taskLimits: fc.dictionary(fc.constantFrom('a', 'b', 'c'), fc.integer({ min: 1, max: 4 })),
    // Grants inside their period already, per queue (`*`) and per key lane.
    grants: fc.dictionary(fc.constantFrom(...QUEUES.flatMap((q) => [`${q}/*`, `${q}/k:a`, `${q}/k:b`])), fc.integer({ min: 1, max: 3 }), {
      maxKeys: 3,
    }),
    served: fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 18, maxLength: 18 }),
    clusterCap: fc.option(fc.integer({ min: 1, max: 12 }), { nil: null }),
    max: fc.integer({ min: 1, max: 16 }),
  })
  .map(({ tasks, env, overrides, keyOverrides, taskLimits, grants, served, clusterCap, max }) => {
    const modelTasks: ModelTask[] = tasks.map((t, i) => ({
      id: i + 1,
      queue: t.queue,
      key: t.key,
      priority: t.priority,
      // A leased or waiting task came due before; only pending ones may be delayed.
      runAt: t.status === 'pending' ? t.runAt : NOW - 1,
      status: t.status,
      ...(t.status === 'waiting' ? { wait: t.wait } : {}),
    }));
    const lanes: ModelLane[] = [];
    for (const t of modelTasks) {
      if (lanes.some((l) => l.queue === t.queue && l.key === t.key)) continue;
      lanes.push({
        id: lanes.length + 1,
        queue: t.queue,
        key: t.key,
        served: served[lanes.length % served.length]!,
        taskLimit: t.key === null ? null : (taskLimits[t.key] ?? null),
      });
    }
    return { state: { tasks: modelTasks, lanes, env, overrides, keyOverrides, grants, clusterCap, now: NOW }, max };
  });
