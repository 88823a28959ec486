/**
 * The Worker's database path (SLUICE_DATABASE_PATH, src/db/workers.ts) is the one the run chose:
 * on the Neon path every statement goes through the local stand-in for Neon's proxy; on the
 * Hyperdrive path (the `hyperdrive` project of vitest.config.ts) none does, and the binding
 * carries them all. A Hyperdrive path without its binding is refused in one line.
 */
import { describe, expect, it } from 'vitest';
import { apiCall, TEST_DATABASE_PATH, useWorkerFixture } from '../helpers/worker-fixture.ts';

const f = useWorkerFixture();

describe(`the Worker's database path (${TEST_DATABASE_PATH})`, () => {
  it('carries every statement, the API’s and the shards’', async () => {
    const enqueued = await apiCall(f.worker.url, f.secrets.apiKey, 'POST', '/v1/tasks', { url: `${f.endpoint.url}/path`, body: { n: 1 } });
    expect(enqueued.status).toBe(201);
    await f.endpoint.waitFor(1, 15_000);
    await expect
      .poll(async () => (await apiCall(f.worker.url, f.secrets.apiKey, 'GET', `/v1/tasks/${enqueued.body.id}`)).body.status)
      .toBe('succeeded');
    const stand_in = f.proxy.stats();
    if (TEST_DATABASE_PATH === 'hyperdrive') expect([stand_in.webSockets, stand_in.sqlRequests]).toEqual([0, 0]);
    else expect(stand_in.webSockets + stand_in.sqlRequests).toBeGreaterThan(0);
  });

  it('refuses the Hyperdrive path without its binding, in one line', async () => {
    const worker = await f.start({ SLUICE_DATABASE_PATH: 'hyperdrive' }).catch((e: unknown) => e);
    // The fixture gives the binding on the Hyperdrive path: there, this start is a plain one.
    if (TEST_DATABASE_PATH === 'hyperdrive') {
      await (worker as { close(): Promise<void> }).close();
      return;
    }
    const running = worker as Awaited<ReturnType<typeof f.start>>;
    try {
      const answer = await apiCall(running.url, f.secrets.apiKey, 'GET', '/v1/queues');
      expect([answer.status, answer.body.code]).toEqual([500, 'bad_configuration']);
      expect(answer.body.issues).toEqual([
        {
          path: 'SLUICE_DATABASE_PATH',
          message: expect.stringMatching(/^is "hyperdrive", but there is no HYPERDRIVE binding: declare \[\[hyperdrive\]\]/),
        },
      ]);
    } finally {
      await running.close();
    }
  });
});
