/**
 * Dedup keys that outlive their task (`dedup_ttl_ms`), on the real Worker in workerd and on the
 * Node server: a task pushed and finished answers for its key, to single and racing enqueues and
 * in a batch, until its TTL has run from its finish (time moved by moving the finish back); a bad
 * TTL is a 400 naming the field.
 */
import { describe, expect, it } from 'vitest';
import type { TestDatabase } from '../helpers/db.ts';
import { apiCall, useNodeBeside, useWorkerFixture } from '../helpers/worker-fixture.ts';

const f = useWorkerFixture(() => ({ SLUICE_RETENTION: '1h', SLUICE_MAX_LEASE_MS: '600000' }));

async function exercise(base: string, db: TestDatabase['db']) {
  const key = f.secrets.apiKey;
  const url = `${f.endpoint.url}/dedup-ttl`;
  const first = await apiCall(base, key, 'POST', '/v1/tasks', { url, dedup_key: 'invoice-9', dedup_ttl_ms: 600_000 });
  expect(first).toMatchObject({ status: 201, body: { dedup_ttl_ms: 600_000, deduplicated: false } });
  const id = String(first.body.id);
  await expect.poll(async () => (await apiCall(base, key, 'GET', `/v1/tasks/${id}`)).body.status, { timeout: 20_000 }).toBe('succeeded');

  // Finished, it still answers for its key: alone, racing, in a batch.
  const again = await apiCall(base, key, 'POST', '/v1/tasks', { url, dedup_key: 'invoice-9', body: { retry: true } });
  expect(again).toMatchObject({ status: 200, body: { id, status: 'succeeded', deduplicated: true } });
  const racing = await Promise.all(
    Array.from({ length: 6 }, () => apiCall(base, key, 'POST', '/v1/tasks', { url, dedup_key: 'invoice-9', dedup_ttl_ms: 600_000 })),
  );
  expect(racing.map((r) => [r.status, r.body.id])).toEqual(racing.map(() => [200, id]));
  const batch = await apiCall(base, key, 'POST', '/v1/tasks/batch', {
    tasks: [
      { url, dedup_key: 'invoice-9' },
      { url, dedup_key: 'invoice-10', dedup_ttl_ms: 1_000, delay_ms: 3_600_000 },
    ],
  });
  const tasks = batch.body.tasks as Array<{ id: string; deduplicated: boolean }>;
  expect(tasks.map((t) => t.deduplicated)).toEqual([true, false]);
  expect(tasks[0]!.id).toBe(id);

  // Ten minutes after its finish the key is free again.
  await db.query(`update sluice.finished set finished_at = finished_at - interval '10 minutes' where id = $1`, [id]);
  const after = await apiCall(base, key, 'POST', '/v1/tasks', { url, dedup_key: 'invoice-9', delay_ms: 3_600_000 });
  expect(after).toMatchObject({ status: 201, body: { deduplicated: false, dedup_ttl_ms: null } });

  for (const [task, message] of [
    [{ dedup_key: 'k', dedup_ttl_ms: 0 }, /./],
    [{ dedup_key: 'k', dedup_ttl_ms: 2_592_000_001 }, /./],
    [{ dedup_key: 'k', dedup_ttl_ms: 'an hour' }, /./],
    [{ dedup_ttl_ms: 60_000 }, /dedup_key/],
    [{ dedup_key: 'k', dedup_ttl_ms: 3_600_001 }, /SLUICE_RETENTION/],
  ] as const) {
    const refused = await apiCall(base, key, 'POST', '/v1/tasks', { url, ...task });
    expect(refused.status, JSON.stringify(task)).toBe(400);
    expect(refused.body.issues, JSON.stringify(task)).toEqual([{ path: 'dedup_ttl_ms', message: expect.stringMatching(message) }]);
  }
}

describe('dedup_ttl_ms', () => {
  it('on the Worker', async () => {
    await exercise(f.worker.url, f.t.db);
  }, 60_000);

  describe('on the Node server', () => {
    const side = useNodeBeside(f, { SLUICE_RETENTION: '1h', SLUICE_MAX_LEASE_MS: '600000' });
    it('holds the same', async () => {
      await exercise(side.node.url, side.t.db);
    }, 60_000);
  });
});
