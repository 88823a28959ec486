/**
 * A lingering run (src/dispatcher/run.ts `lingerMs`), against a real Postgres and a real
 * endpoint: with nothing to claim it waits before it ends, and work that comes meanwhile is
 * pushed by the same run — a task announced by a nudge at once, a retry as it comes due — on
 * the connection it has, without a new run's reap and probes. A run that lingers in vain ends
 * with the next due time read, as one that does not linger.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { dispatchRun } from '../../src/dispatcher/run.ts';
import { DUE_EVENT } from '../../src/dispatcher/run-options.ts';
import type { Keyring } from '../../src/security/keyring.ts';
import type { TestDatabase } from '../helpers/db.ts';
import type { TestEndpoint } from '../helpers/endpoint.ts';
import { useDispatchFixture } from '../helpers/fixture.ts';
import { newTask } from '../helpers/tasks.ts';

const f = useDispatchFixture();
let t: TestDatabase;
let endpoint: TestEndpoint;
let config: Config;
let keyring: Keyring;
beforeAll(() => {
  ({ t, endpoint, config, keyring } = f);
});

describe('a lingering run', () => {
  it('pushes a task announced while it lingers, and a retry as it comes due, then ends', async () => {
    const nudges = new EventTarget();
    endpoint.reply((push) => (push.path === '/flaky' && push.headers['sluice-attempt'] === '1' ? { status: 500 } : { status: 200 }));
    await taskInsertMany(t.db, [newTask({ url: `${endpoint.url}/flaky`, backoff: { initialMs: 300, maxMs: 300, factor: 1, jitter: 0 } })]);
    const started = Date.now();
    const running = dispatchRun({ db: t.db, config, keyring }, { budgetMs: 20_000, nudges, lingerMs: 1_500 });
    // The first push fails; while the run lingers, another task comes, and is announced.
    await endpoint.waitFor(1, 5_000);
    await new Promise((r) => setTimeout(r, 100));
    await taskInsertMany(t.db, [newTask({ url: `${endpoint.url}/late` })]);
    nudges.dispatchEvent(new Event(DUE_EVENT));
    const report = await running;
    const paths = endpoint.received.map((p) => `${p.path} ${p.headers['sluice-attempt']}`);
    expect(paths).toEqual(['/flaky 1', '/late 1', '/flaky 2']);
    expect(report).toMatchObject({ claimed: 3, succeeded: 2, retried: 1, more: false, nextDueInMs: null });
    // The retry came its backoff after the failure, never sooner, in the same run, not at the
    // next one's start.
    const [first, , retry] = endpoint.received;
    expect(retry!.receivedAt - first!.receivedAt).toBeGreaterThanOrEqual(300);
    // It lingered once more, in vain, before it ended.
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_500);
    endpoint.reply(() => ({ status: 200 }));
  });

  it('ends as one that does not linger when nothing comes, with the next due time read', async () => {
    endpoint.received.length = 0;
    await taskInsertMany(t.db, [newTask({ url: `${endpoint.url}/later`, runAt: new Date(Date.now() + 60_000) })]);
    const report = await dispatchRun({ db: t.db, config, keyring }, { budgetMs: 20_000, lingerMs: 200 });
    expect(report).toMatchObject({ claimed: 0, more: false });
    expect(report.nextDueInMs).toBeGreaterThan(55_000);
    expect(report.nextDueInMs).toBeLessThanOrEqual(60_000);
  });
});
