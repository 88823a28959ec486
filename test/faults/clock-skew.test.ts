/**
 * The app's clock and the database's disagree (the reliability issue's clock fault). Leases,
 * due times and expiries are the database's (`now()`); what the app decides on its own clock
 * (a push's deadline, a retry's backoff) must not depend on the two agreeing. A process whose
 * clock is off reads a shifted `Date.now()`, while its timers (monotonic) run true: that is
 * what this file gives the dispatcher, in this process, while the database keeps its clock.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { taskGet } from '../../src/db/tasks.ts';
import { dispatchRun } from '../../src/dispatcher/run.ts';
import { useDispatchFixture } from '../helpers/fixture.ts';
import { newTask } from '../helpers/tasks.ts';

const f = useDispatchFixture();

const SKEW_MS = 30_000;
const trueNow = Date.now.bind(Date);
afterEach(() => {
  vi.restoreAllMocks();
});
/** A dispatcher run on a clock `skewMs` ahead of the database's (behind when negative). */
const run = (skewMs: number) => {
  vi.spyOn(Date, 'now').mockImplementation(() => trueNow() + skewMs);
  return dispatchRun({ db: f.t.db, config: f.config, keyring: f.keyring }, { budgetMs: 5_000 });
};
const enqueue = async (overrides: Parameters<typeof newTask>[0] = {}) =>
  (await taskInsertMany(f.t.db, [newTask({ url: `${f.endpoint.url}/hook`, timeoutMs: 1_000, leaseMs: 3_000, ...overrides })]))[0]!.task;

describe.each([
  ['ahead of', SKEW_MS],
  ['behind', -SKEW_MS],
])("the app's clock %s the database's by 30 s", (_, skewMs) => {
  it('a task is pushed and succeeds (the push deadline is measured from the claim, not across clocks)', async () => {
    const task = await enqueue();
    expect(await run(skewMs)).toMatchObject({ claimed: 1, succeeded: 1 });
    expect(f.endpoint.received).toHaveLength(1);
    expect((await taskGet(f.t.db, task.id))!.status).toBe('succeeded');
  });

  it('a retry waits its backoff on the database clock: neither skipped nor stretched by the skew', async () => {
    f.endpoint.reply(() => ({ status: 500 }));
    const task = await enqueue({ backoff: { initialMs: 5_000, maxMs: 5_000, factor: 1, jitter: 0 } });
    expect(await run(skewMs)).toMatchObject({ retried: 1 });
    const [row] = await f.t.db.query<{ wait_ms: number }>(
      'select (extract(epoch from run_at - now()) * 1000)::float8 as wait_ms from sluice.all_tasks where id = $1',
      [task.id],
    );
    expect(row!.wait_ms).toBeGreaterThan(3_000);
    expect(row!.wait_ms).toBeLessThanOrEqual(5_000);
  });
});
