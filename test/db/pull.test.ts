/**
 * The pull loop (src/api/pull.ts) against a real Postgres, with the platform's wait in the
 * test's hands: a waiting pull claims again when its wait is woken and not before, and a pull
 * whose answer cannot be made gives its leases back rather than leaving them held for nobody.
 */
import { describe, expect, it } from 'vitest';
import { type PullContext, pullTasks } from '../../src/api/pull.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { useDispatchFixture } from '../helpers/fixture.ts';
import { newTask } from '../helpers/tasks.ts';

const f = useDispatchFixture({ SLUICE_QUEUES: JSON.stringify({ inbox: { pull: true } }) });

/** A context whose waits end only when the test says so (`wake`). */
function context(overrides: Partial<PullContext> = {}) {
  const woken: Array<() => void> = [];
  let waits = 0;
  const ctx: PullContext = {
    db: f.t.db,
    config: f.config,
    keyring: async () => f.keyring,
    awaitWork: () => {
      waits++;
      return new Promise<void>((resolve) => woken.push(resolve));
    },
    signal: new AbortController().signal,
    poke: () => {},
    ...overrides,
  };
  const wake = () => {
    for (const resolve of woken.splice(0)) resolve();
  };
  return { ctx, wake, waits: () => waits };
}

const enqueueInbox = async (n: number) =>
  (await taskInsertMany(f.t.db, [newTask({ queue: 'inbox', url: null, body: JSON.stringify({ n }) })]))[0]!.task;

describe('a waiting pull', () => {
  it('claims again when its wait is woken, and not before', async () => {
    const { ctx, wake, waits } = context();
    let answered = false;
    const pulling = pullTasks(ctx, 'inbox', { max: 5, waitMs: 60_000, pushTo: undefined }).finally(() => {
      answered = true;
    });
    await expect.poll(waits).toBe(1);
    const task = await enqueueInbox(1);
    // Nothing comes due later (the task is due now), so only the wait can end the poll's sleep.
    await new Promise((r) => setTimeout(r, 200));
    expect(answered).toBe(false);
    wake();
    const got = await pulling;
    expect(got.map((t) => [t.id, t.attempt])).toEqual([[task.id, 1]]);
  });

  it('whose answer cannot be made gives its leases back, their attempts unused', async () => {
    const { ctx } = context({
      keyring: async () => {
        throw new Error('keys unavailable');
      },
    });
    const task = await enqueueInbox(2);
    await expect(pullTasks(ctx, 'inbox', { max: 5, waitMs: 0, pushTo: undefined })).rejects.toThrow('keys unavailable');
    const [row] = await f.t.db.query<{ status: string; attempts: number }>('select status, attempts from sluice.tasks where id = $1', [
      task.id,
    ]);
    expect(row).toEqual({ status: 'pending', attempts: 0 });
  });
});
