/**
 * Redriving every dead task that matches a filter (the dashboard's "redrive all"), in batches:
 * each batch moves past what it examined, dedup keys held by unfinished tasks are respected, and
 * lanes' hints are lowered so the claim finds the redriven tasks.
 */
import { describe, expect, it } from 'vitest';
import { taskClaimBatch } from '../../src/db/claim.ts';
import { taskInsertMany } from '../../src/db/enqueue.ts';
import { moveStragglers } from '../../src/db/history.ts';
import { taskRedriveMatching } from '../../src/db/tasks.ts';
import { useDispatchFixture } from '../helpers/fixture.ts';
import { newTask } from '../helpers/tasks.ts';

const f = useDispatchFixture();

async function deadTasks(tasks: Parameters<typeof newTask>[0][]): Promise<string[]> {
  const ids = (
    await taskInsertMany(
      f.t.db,
      tasks.map((t) => newTask(t)),
    )
  ).map((r) => r.task.id);
  // Dead in place, then into history as any finished task (db/history.ts).
  await f.t.db.query(`update sluice.tasks set status = 'dead', finished_at = now(), attempts = 1 where id = any($1::bigint[])`, [ids]);
  await moveStragglers(f.t.db, ids.length);
  return ids;
}

async function statuses(ids: readonly string[]): Promise<string[]> {
  const rows = await f.t.db.query<{ id: string; status: string }>(
    'select id::text, status from sluice.all_tasks where id = any($1::bigint[])',
    [ids],
  );
  return ids.map((id) => rows.find((r) => r.id === id)?.status ?? 'missing');
}

describe('redriving dead tasks that match a filter', () => {
  it('goes through them in batches, oldest first, and only those that match', async () => {
    const mine = await deadTasks([{ queue: 'a' }, { queue: 'a' }, { queue: 'a', concurrencyKey: 'k' }, { queue: 'a' }, { queue: 'a' }]);
    const other = await deadTasks([{ queue: 'b' }]);
    const first = await taskRedriveMatching(f.t.db, { queue: 'a' }, null, 2);
    expect(first).toEqual({ examined: 2, redriven: 2, lastId: mine[1] });
    const rest = await taskRedriveMatching(f.t.db, { queue: 'a' }, first.lastId, 10);
    expect(rest).toEqual({ examined: 3, redriven: 3, lastId: mine[4] });
    expect(await statuses([...mine, ...other])).toEqual(['pending', 'pending', 'pending', 'pending', 'pending', 'dead']);
    // Fresh attempts, due now, and claimable: the lanes' hints were lowered.
    const rows = await f.t.db.query<{ attempts: number; finished_at: Date | null }>(
      'select attempts, finished_at from sluice.all_tasks where id = any($1::bigint[])',
      [mine],
    );
    expect(rows.every((r) => r.attempts === 0 && r.finished_at === null)).toBe(true);
    const claimed = await taskClaimBatch(f.t.db, { max: 10, clusterCap: null, queuesJson: '{}' });
    expect(claimed.map((t) => t.id).sort()).toEqual([...mine].sort());
  });

  it('filters by key, and leaves alone a task whose dedup key an unfinished task holds', async () => {
    const [keyed, unkeyed] = await deadTasks([{ queue: 'a', concurrencyKey: 'k' }, { queue: 'a' }]);
    // One dedup key on two dead tasks (each enqueued once the other had died), and one held by a pending task.
    const [older] = await deadTasks([{ queue: 'a', concurrencyKey: 'k', dedupKey: 'twice' }]);
    const [newer, blocked] = await deadTasks([
      { queue: 'a', concurrencyKey: 'k', dedupKey: 'twice' },
      { queue: 'a', concurrencyKey: 'k', dedupKey: 'held' },
    ]);
    await taskInsertMany(f.t.db, [newTask({ queue: 'a', dedupKey: 'held' })]);
    const report = await taskRedriveMatching(f.t.db, { queue: 'a', concurrencyKey: 'k' }, null, 10);
    expect(report).toMatchObject({ examined: 4, redriven: 2 });
    expect(await statuses([keyed!, unkeyed!, older!, newer!, blocked!])).toEqual(['pending', 'dead', 'dead', 'pending', 'dead']);
  });
});
