/**
 * Waits on child tasks through the real Worker in workerd: the seed's two examples, resumed by
 * the scheduler's alarm (the cron never fires here), and the recursive wait refused.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { playFamilies, type WaitOutcome } from '../helpers/waits.ts';
import { useWorkerFixture } from '../helpers/worker-fixture.ts';

const f = useWorkerFixture(() => ({ SLUICE_CLUSTER_CAP: '1', SLUICE_QUEUES: JSON.stringify({ solo: { concurrency: 1 } }) }));
let waits: WaitOutcome[];
beforeEach(() => {
  f.endpoint.received.length = 0;
  ({ waits } = playFamilies(f.endpoint, () => f.worker.url, f.secrets.apiKey));
});

async function run(family: unknown, queue: string): Promise<{ status: string; attempts: number; resumes: number }> {
  const res = await fetch(`${f.worker.url}/v1/tasks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${f.secrets.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ queue, url: `${f.endpoint.url}/parent`, body: { family } }),
  });
  expect(res.status).toBe(201);
  const { id } = (await res.json()) as { id: string };
  const read = async () =>
    (await (await fetch(`${f.worker.url}/v1/tasks/${id}`, { headers: { authorization: `Bearer ${f.secrets.apiKey}` } })).json()) as {
      status: string;
      attempts: number;
      resumes: number;
    };
  await expect.poll(async () => (await read()).status, { timeout: 20_000 }).toBe('succeeded');
  return read();
}

describe('waits on the Worker', () => {
  it('a cluster cap of 1: the child on another queue runs, the parent resumes', async () => {
    const done = await run({ children: [{ queue: 'kids' }] }, 'parents');
    expect(done).toMatchObject({ attempts: 1, resumes: 1 });
    expect(f.endpoint.received.map((p) => p.path)).toEqual(['/parent', '/child', '/parent']);
    expect(f.endpoint.received[2]!.headers['sluice-resume']).toBe('1');
  });

  it('queue limit 1: the child runs in the parent’s slot; a grandchild wait is refused', async () => {
    await run({ children: [{ queue: 'solo', body: { family: { children: [{ queue: 'solo' }] } } }] }, 'solo');
    expect(waits.map((w) => w.status)).toEqual([200, 409]);
    expect(waits[0]!.answer.lent_queue).toBe(true);
    expect(waits[1]!.answer.code).toBe('recursive_wait_deadlock');
  });
});
