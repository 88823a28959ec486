/**
 * The `sluice` CLI against the Worker in workerd: tail, status, queues set and a forced release
 * (cli.test.ts and cli-tasks.test.ts have the Node server).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { adminKey, enqueue, expectDocumented, json, replies, sluice, startTail, type Target, until, withAdmin } from '../helpers/cli.ts';
import { useWorkerFixture } from '../helpers/worker-fixture.ts';

describe('sluice against the Worker', () => {
  const f = useWorkerFixture((f) => ({ SLUICE_API_KEYS: withAdmin(f.secrets) }));
  const target = (key: string): Target => ({ url: f.worker.url, env: { SLUICE_URL: f.worker.url, SLUICE_API_KEY: key } });
  const taskRow = async (id: string) =>
    (
      await f.t.db.query<{ status: string; lease_id: string | null }>('select status, lease_id from sluice.all_tasks where id = $1', [id])
    )[0];
  beforeAll(() => replies(f.endpoint));

  it('tail prints a task enqueued with the CLI and its finish; status and queues set see and change the queue', async () => {
    const enqueueWithCli = () =>
      json<{ id: string }>(
        sluice(target(f.secrets.apiKey), ['tasks', 'enqueue', '--endpoint', `${f.endpoint.url}/ok`, '--queue', 'wq', '--json']),
      );
    const first = await enqueueWithCli();
    await until(async () => (await taskRow(first.id))?.status === 'succeeded', 'the first task');
    const tail = startTail(target(f.secrets.readKey), ['--queue', 'wq', '--interval', '100', '--lines', '1']);
    expect(await tail.waitFor((l) => /\brecent\b/.test(l), 'the first task')).toMatch(
      new RegExp(`recent +${first.id} +wq +- +succeeded +1/5$`),
    );
    const made = await enqueueWithCli();
    const finished = await tail.waitFor((l) => /\bfinished\b/.test(l), 'the finish');
    expect(finished).toMatch(new RegExp(`^\\S+Z +finished +${made.id} +wq +- +succeeded +1/5$`));
    expect(await tail.interrupt()).toBe(0);
    expect(await taskRow(made.id)).toMatchObject({ status: 'succeeded' });

    const admin = target(adminKey.key);
    expect((await sluice(admin, ['queues', 'set', 'wq', '--concurrency', '2'])).stdout).toMatch(/concurrency +2 \(override\)/);
    const one = await json<{ queue: object; concurrency: object }>(sluice(admin, ['status', 'wq', '--json']));
    await expectDocumented('GET', `${f.worker.url}/v1/queues/wq`, one.queue);
    expect(one.queue).toMatchObject({ concurrency: { value: 2, source: 'override' } });
    expect((await f.t.db.query('select options from sluice.queues where name = $1', ['wq']))[0]).toEqual({ options: { concurrency: 2 } });
  });

  it('lease release --force frees a lease the endpoint keeps', async () => {
    const admin = target(adminKey.key);
    const id = await enqueue(admin, { queue: 'wstuck', url: `${f.endpoint.url}/keep`, lease_ms: 600_000, timeout_ms: 5_000 });
    const lease = await until(async () => (await taskRow(id))?.lease_id, 'the lease');
    await json(sluice(admin, ['queues', 'pause', 'wstuck', '--json']));
    expect((await sluice(admin, ['lease', 'release', 'wstuck', lease])).code).toBe(2);
    expect(await taskRow(id)).toMatchObject({ status: 'leased', lease_id: lease });
    expect((await sluice(admin, ['lease', 'release', 'wstuck', lease, '--force'])).stdout).toBe(
      `released lease ${lease}: task ${id} is pending again, its attempt given back\n`,
    );
    expect(await taskRow(id)).toMatchObject({ status: 'pending', lease_id: null });
  });
});
