/** What only the configuration reveals about an enqueue request (src/api/schemas/resolve.ts `checkTask`). */
import { describe, expect, it } from 'vitest';
import { checkTask } from '../../src/api/schemas/resolve.ts';
import { loadConfig } from '../../src/config.ts';
import { makeSecrets, testEnv } from '../helpers/config.ts';

const secrets = await makeSecrets();
const config = loadConfig({ ...testEnv(secrets, 'postgres://u:p@db.example.com/sluice'), SLUICE_MAX_LEASE_MS: '120000' });
const url = 'https://example.com/hook';

describe('checkTask', () => {
  it('refuses a lease longer than the deployment allows, naming the field and the bound', () => {
    expect(checkTask({ url, lease_ms: 120_001 }, config, 'tasks.2')).toEqual({
      issues: [{ path: 'tasks.2.lease_ms', message: 'is at most 120000 on this deployment (SLUICE_MAX_LEASE_MS)' }],
    });
    expect(checkTask({ url, lease_ms: 120_000 }, config, '')).toMatchObject({ task: { leaseMs: 120_000 } });
  });
});
