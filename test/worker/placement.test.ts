/**
 * SLUICE_DB_LOCATION_HINT (src/worker/bindings.ts): the scheduler and the pusher shards are
 * created with the hint, and dispatch works as ever (workerd takes the hint and runs every
 * object here; where Cloudflare puts them is docs/operations.md's to say). A hint that is not
 * one of Cloudflare's is refused with one line naming it.
 */
import { describe, expect, it } from 'vitest';
import { apiCall, useWorkerFixture } from '../helpers/worker-fixture.ts';

const f = useWorkerFixture(() => ({ SLUICE_DB_LOCATION_HINT: 'weur' }));

describe('the Durable Objects placed by the database', () => {
  it('dispatch as ever with a location hint', async () => {
    const enqueued = await apiCall(f.worker.url, f.secrets.apiKey, 'POST', '/v1/tasks', {
      url: `${f.endpoint.url}/placed`,
      body: { n: 1 },
    });
    expect(enqueued.status).toBe(201);
    const [push] = await f.endpoint.waitFor(1, 15_000);
    expect(push!.path).toBe('/placed');
  });

  it('refuse an unknown hint in one line', async () => {
    const worker = await f.start({ SLUICE_DB_LOCATION_HINT: 'us-east-2' });
    try {
      const answer = await apiCall(worker.url, f.secrets.apiKey, 'GET', '/v1/queues');
      expect([answer.status, answer.body.code, answer.body.detail]).toEqual([
        500,
        'bad_configuration',
        'Sluice is misconfigured (SLUICE_DB_LOCATION_HINT); the server log says how to fix it',
      ]);
      expect(answer.body.issues).toEqual([
        { path: 'SLUICE_DB_LOCATION_HINT', message: expect.stringMatching(/^must be one of Cloudflare's location hints: wnam, enam/) },
      ]);
    } finally {
      await worker.close();
    }
  });
});
