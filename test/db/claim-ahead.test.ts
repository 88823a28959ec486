/**
 * Claiming ahead (src/dispatcher/pacing.ts `ClaimAhead`), against a real Postgres and a real
 * endpoint: once a run has measured its claims and pushes, it holds tasks claimed beyond its
 * places, each a lease counted by every limit; it pushes them as places free, in the order
 * the claim chose, with the time they waited taken off their push's deadline; and a run told
 * to stop gives back what it never pushed, no attempt spent.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { dispatchRun } from '../../src/dispatcher/run.ts';
import type { Keyring } from '../../src/security/keyring.ts';
import type { TestDatabase } from '../helpers/db.ts';
import type { TestEndpoint } from '../helpers/endpoint.ts';
import { useDispatchFixture } from '../helpers/fixture.ts';
import { newTask } from '../helpers/tasks.ts';

const f = useDispatchFixture({ SLUICE_DISPATCH_PARALLELISM: '2' });
let t: TestDatabase;
let endpoint: TestEndpoint;
let config: Config;
let keyring: Keyring;
beforeAll(() => {
  ({ t, endpoint, config, keyring } = f);
});

const leased = async () =>
  Number((await t.db.query<{ n: string }>(`select count(*)::text as n from sluice.tasks where status = 'leased'`))[0]!.n);

describe('claiming ahead', () => {
  it('holds leases beyond the places while pushes run, and pushes every one of them', async () => {
    // Slow answers: while two pushes run, more are claimed and wait for a place.
    endpoint.reply(() => ({ status: 200, delayMs: 40 }));
    await taskInsertMany(
      t.db,
      Array.from({ length: 30 }, (_, i) => newTask({ url: `${endpoint.url}/ahead`, body: JSON.stringify({ i }) })),
    );
    let most = 0;
    const sampling = setInterval(() => void leased().then((n) => (most = Math.max(most, n))), 5);
    const report = await dispatchRun({ db: t.db, config, keyring }, { budgetMs: 20_000 });
    clearInterval(sampling);
    expect(report).toMatchObject({ claimed: 30, succeeded: 30 });
    // More leases than places at some point: tasks were held ahead (two places only).
    expect(most).toBeGreaterThan(2);
    expect(endpoint.received).toHaveLength(30);
    expect(await leased()).toBe(0);
    endpoint.reply(() => ({ status: 200 }));
  });

  it('gives back, unused, what it claimed and never pushed when told to stop', async () => {
    endpoint.received.length = 0;
    endpoint.reply(() => ({ status: 200, delayMs: 100 }));
    const tasks = await taskInsertMany(
      t.db,
      Array.from({ length: 40 }, () => newTask({ url: `${endpoint.url}/stop` })),
    );
    const stop = new AbortController();
    // Stop once tasks wait for a place: more leased than the two places.
    const stopping = (async () => {
      while ((await leased()) <= 2) await new Promise((r) => setTimeout(r, 5));
      stop.abort();
    })();
    const report = await dispatchRun({ db: t.db, config, keyring }, { budgetMs: 20_000, signal: stop.signal });
    await stopping;
    const rows = await t.db.query<{ status: string; attempts: number }>(
      'select status, attempts from sluice.all_tasks where id = any($1::bigint[])',
      [tasks.map((x) => x.task.id)],
    );
    const pushed = endpoint.received.length;
    expect(report.claimed).toBeGreaterThan(pushed);
    expect(rows.filter((r) => r.status === 'succeeded')).toHaveLength(pushed);
    // The rest: pending again, their attempt given back; nothing left leased.
    expect(rows.filter((r) => r.status === 'pending').every((r) => r.attempts === 0)).toBe(true);
    expect(rows.filter((r) => r.status === 'pending')).toHaveLength(40 - pushed);
    expect(await leased()).toBe(0);
    endpoint.reply(() => ({ status: 200 }));
  });
});
