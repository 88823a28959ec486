/**
 * Rates with a burst (migrations/0017_rate_burst.sql): a token bucket kept as GCRA, per queue and
 * per key, in the claim, with claim passes at a clock the test moves.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { concurrencyPicture } from '../../src/api/queue-ops.ts';
import type { Config } from '../../src/config.ts';
import { bucketRoom } from '../../src/core/limits.ts';
import { nextDueInMs } from '../../src/db/due.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { rateBucketsSweep } from '../../src/db/retention.ts';
import { testConfig } from '../helpers/config.ts';
import { createTestDatabase, emptyTables, type TestDatabase } from '../helpers/db.ts';
import { claimAtMs, dbNowMs, longDue } from '../helpers/moved-clock.ts';
import { newTask } from '../helpers/tasks.ts';

// 2 per second refilling (one every 500 ms), up to 5 at once.
const BURST = { limit: 2, period_ms: 1_000, burst: 5 };
const QUEUES = { bursty: { rate: BURST }, perkey: { key_rate: BURST } };

let t: TestDatabase;
let config: Config;

beforeAll(async () => {
  t = await createTestDatabase();
  ({ config } = await testConfig(t.url, { SLUICE_QUEUES: JSON.stringify(QUEUES) }));
});
afterAll(async () => {
  await t?.drop();
});
beforeEach(async () => {
  await emptyTables(t.db, 'sluice.tasks, sluice.lanes, sluice.queues, sluice.rate_grants, sluice.rate_buckets');
  await t.db.query('update sluice.promotion set promoted_to = now()');
});

const dbNow = () => dbNowMs(t.db);
const claimAt = (ms: number, max = 100) => claimAtMs(t.db, config, ms, max);
const due = longDue;
const insert = (n: number, extra: Parameters<typeof newTask>[0]) =>
  taskInsertMany(
    t.db,
    Array.from({ length: n }, () => newTask({ runAt: due(), ...extra })),
  );

describe('a rate with a burst', () => {
  it('leases up to the burst at once, then one per period / limit; what waits uses no attempt', async () => {
    await insert(20, { queue: 'bursty' });
    const t0 = await dbNow();
    expect(await claimAt(t0)).toHaveLength(5);
    expect(await claimAt(t0 + 400)).toHaveLength(0);
    expect(await claimAt(t0 + 500)).toHaveLength(1);
    expect(await claimAt(t0 + 999)).toHaveLength(0);
    expect(await claimAt(t0 + 1_000)).toHaveLength(1);
    // Idle long enough, the bucket is full again: the burst, never more.
    expect(await claimAt(t0 + 60_000)).toHaveLength(5);
    const [waiting] = await t.db.query<{ n: number; attempts: number }>(
      `select count(*)::int as n, max(attempts)::int as attempts from sluice.tasks where status = 'pending'`,
    );
    expect(waiting).toEqual({ n: 8, attempts: 0 });
    // The queue's picture counts the tokens taken.
    const picture = await concurrencyPicture(config, t.db, 'bursty');
    expect(picture.queueLevel.rate).toMatchObject({ value: BURST, source: 'env', used: 5 });
  });

  it('keeps a bucket per key: one key spending its burst leaves the others theirs', async () => {
    await insert(8, { queue: 'perkey', concurrencyKey: 'a' });
    await insert(8, { queue: 'perkey', concurrencyKey: 'b' });
    const t0 = await dbNow();
    const first = await claimAt(t0);
    expect(first.filter((x) => x.concurrencyKey === 'a')).toHaveLength(5);
    expect(first.filter((x) => x.concurrencyKey === 'b')).toHaveLength(5);
    expect(await claimAt(t0 + 499)).toHaveLength(0);
    const next = await claimAt(t0 + 500);
    expect(next.map((x) => x.concurrencyKey).sort()).toEqual(['a', 'b']);
  });

  it('wakes the dispatcher when the next token comes, and the sweep forgets a full bucket', async () => {
    await insert(6, { queue: 'bursty' });
    // On the database's clock: the next token is T = 500 ms after the burst.
    expect(await claimAt(await dbNow())).toHaveLength(5);
    const dueIn = await nextDueInMs(t.db);
    expect(dueIn).not.toBeNull();
    expect(dueIn!).toBeLessThanOrEqual(500);
    expect(await rateBucketsSweep(t.db)).toBe(0);
    await t.db.query(`update sluice.rate_buckets set tat = now() - interval '1 second'`);
    expect(await rateBucketsSweep(t.db)).toBe(1);
  });

  it('bucketRoom is the claim’s arithmetic', () => {
    expect(bucketRoom(BURST, null, 0)).toBe(5);
    expect(bucketRoom(BURST, 2_500, 0)).toBe(0);
    expect(bucketRoom(BURST, 2_500, 500)).toBe(1);
    expect(bucketRoom(BURST, 2_500, 2_499)).toBe(4);
    expect(bucketRoom(BURST, 2_500, 10_000)).toBe(5);
  });
});
