import { describe, expect, it } from 'vitest';
import { describeLimits, loadConfig, queueDefaults } from '../../src/config.ts';
import { parseRetention } from '../../src/config-fields.ts';
import { ConfigError } from '../../src/core/errors.ts';
import { makeSecrets, testEnv } from '../helpers/config.ts';

const secrets = await makeSecrets();
const base = testEnv(secrets, 'postgres://u:p@db.example.com/sluice');

function problems(env: Record<string, unknown>): string[] {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).issues.map((i) => `${i.path}: ${i.message}`);
  }
  return [];
}

describe('loadConfig', () => {
  it('applies the documented defaults', () => {
    const config = loadConfig({ ...base, SLUICE_ALLOW_PRIVATE_TARGETS: undefined });
    expect(config).toMatchObject({
      leaseMs: 60_000,
      pushTimeoutMs: 30_000,
      maxClaimBatch: 100,
      dispatchParallelism: 6,
      dispatchShards: 4,
      apiDatabase: 'http',
      retentionMs: 7 * 86_400_000,
      allowPrivateTargets: false,
      issuer: 'sluice',
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('names each missing or broken variable with a fix', () => {
    const found = problems({ SLUICE_SIGNING_KEYS: '{"keys":[]}', SLUICE_API_KEYS: 'not json', SLUICE_LEASE_MS: 'soon' });
    expect(found).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^DATABASE_URL: is required/),
        'SLUICE_API_KEYS: is not valid JSON',
        expect.stringMatching(/^SLUICE_SIGNING_KEYS: .*npm run keys:signing/),
        expect.stringMatching(/^SLUICE_LEASE_MS: /),
      ]),
    );
  });

  it('refuses a push timeout that is not shorter than the lease, globally or per queue', () => {
    expect(problems({ ...base, SLUICE_LEASE_MS: '10000', SLUICE_PUSH_TIMEOUT_MS: '10000' })).toEqual([
      expect.stringMatching(/^SLUICE_PUSH_TIMEOUT_MS: must be shorter than SLUICE_LEASE_MS/),
    ]);
    expect(problems({ ...base, SLUICE_QUEUES: JSON.stringify({ slow: { lease_ms: 5000 } }) })).toEqual([
      'SLUICE_QUEUES.slow.timeout_ms: must be shorter than the lease (5000 ms)',
    ]);
  });

  it('refuses a lease longer than SLUICE_MAX_LEASE_MS, globally or per queue (its token would expire first)', () => {
    expect(problems({ ...base, SLUICE_MAX_LEASE_MS: '30000' })).toEqual([
      "SLUICE_LEASE_MS: must be at most SLUICE_MAX_LEASE_MS (30000): a push's lease token is good for that long",
    ]);
    expect(
      problems({
        ...base,
        SLUICE_MAX_LEASE_MS: '120000',
        SLUICE_QUEUES: JSON.stringify({ long: { lease_ms: 180_000, timeout_ms: 1_000 } }),
      }),
    ).toEqual([expect.stringMatching(/^SLUICE_QUEUES\.long\.lease_ms: must be at most SLUICE_MAX_LEASE_MS \(120000\)/)]);
    expect(problems({ ...base, SLUICE_MAX_LEASE_MS: '60000' })).toEqual([]);
  });

  it("names pusher shards in the Worker's start line only", () => {
    const config = loadConfig({ ...base, SLUICE_DISPATCH_SHARDS: '4' });
    expect(describeLimits(config, 'worker')).toContain('shards 4');
    expect(describeLimits(config, 'node')).not.toContain('shards');
    expect(describeLimits(config, 'node')).toMatch(/^lease 60000 ms, push timeout 30000 ms, claim batch 100, parallelism \d+, cluster cap/);
  });

  it("says a queue's burst and adaptivity in the start line", () => {
    const queues = { hooks: { concurrency: 64, adaptive: true, rate: { limit: 10, period_ms: 1_000, burst: 20 } } };
    const config = loadConfig({ ...base, SLUICE_QUEUES: JSON.stringify(queues) });
    expect(describeLimits(config, 'node')).toMatch(/queue hooks: concurrency 64 key_concurrency ∞ rate 10\/1000 ms burst 20 adaptive/);
  });

  it('reads SLUICE_PUBLIC_URL as an origin, and refuses one with a path or another scheme', () => {
    expect(loadConfig(base).publicOrigin).toBeNull();
    expect(loadConfig({ ...base, SLUICE_PUBLIC_URL: 'https://Sluice.Example.com/' }).publicOrigin).toBe('https://sluice.example.com');
    expect(loadConfig({ ...base, SLUICE_PUBLIC_URL: 'http://10.0.0.5:8080' }).publicOrigin).toBe('http://10.0.0.5:8080');
    for (const bad of [
      'sluice.example.com',
      'https://sluice.example.com/sluice',
      'ftp://sluice.example.com',
      'https://u:p@sluice.example.com',
    ]) {
      expect(problems({ ...base, SLUICE_PUBLIC_URL: bad }), bad).toEqual([expect.stringMatching(/^SLUICE_PUBLIC_URL: must be the origin/)]);
    }
  });

  it('refuses unknown queue options by name (no silent typos)', () => {
    expect(problems({ ...base, SLUICE_QUEUES: JSON.stringify({ emails: { max_attempt: 3 } }) })).toEqual([
      'SLUICE_QUEUES.emails.max_attempt: is not a known field',
    ]);
  });

  it('accepts JSON vars already parsed by wrangler, and resolves queue defaults', () => {
    const config = loadConfig({
      ...base,
      SLUICE_QUEUES: { emails: { url: 'https://example.com/e', max_attempts: 9, backoff: { factor: 3 } } },
      SLUICE_MAX_CLAIM_BATCH: 8,
    });
    expect(config.maxClaimBatch).toBe(8);
    expect(queueDefaults(config, 'emails')).toMatchObject({
      url: 'https://example.com/e',
      maxAttempts: 9,
      backoff: { factor: 3, initialMs: 1_000 },
    });
    expect(queueDefaults(config, 'other')).toMatchObject({ url: null, maxAttempts: 5, leaseMs: 60_000 });
  });

  it("refuses a signing key whose curve is not its algorithm's (Ed448 under EdDSA)", () => {
    const [key] = JSON.parse(base.SLUICE_SIGNING_KEYS as string).keys;
    const found = problems({ ...base, SLUICE_SIGNING_KEYS: JSON.stringify({ keys: [{ ...key, crv: 'Ed448' }] }) });
    expect(found).toEqual([expect.stringMatching(/^SLUICE_SIGNING_KEYS: .*keys\[0\]\.crv must be Ed25519 for EdDSA/)]);
  });

  it('does not echo a secret that fails to parse', () => {
    const found = problems({ ...base, SLUICE_API_KEYS: '{"sha256": secret-value' });
    expect(found.join(' ')).not.toContain('secret-value');
  });

  it('reads SLUICE_RETENTION as a duration, or "forever", and refuses less than a minute', () => {
    expect(parseRetention('7d')).toBe(604_800_000);
    expect(parseRetention('12h')).toBe(43_200_000);
    expect(parseRetention('90s')).toBe(90_000);
    expect(parseRetention('3600000')).toBe(3_600_000);
    expect(parseRetention(' Forever ')).toBeNull();
    expect(parseRetention('30s')).toBeUndefined();
    expect(parseRetention('1w')).toBeUndefined();
    expect(problems({ ...base, SLUICE_RETENTION: 'a week' })).toEqual([expect.stringMatching(/^SLUICE_RETENTION: must be a duration/)]);
  });
});

describe('forwarded pushes in the configuration', () => {
  it('refuses the forwarded pushes’ issuer as SLUICE_ISSUER', () => {
    expect(problems({ ...base, SLUICE_ISSUER: 'sluice-forward' })).toEqual([
      expect.stringMatching(/^SLUICE_ISSUER: must not be "sluice-forward": that issuer marks forwarded pushes/),
    ]);
  });

  it('reads an API key’s forward_to as origins, and refuses anything else', () => {
    const [entry] = JSON.parse(secrets.apiKeysJson) as object[];
    const withForward = (forward_to: unknown) => ({ ...base, SLUICE_API_KEYS: JSON.stringify([{ ...entry, forward_to }]) });
    expect(loadConfig(withForward(['https://dev.example.com:8443'])).apiKeys[0]).toMatchObject({
      forwardTo: ['https://dev.example.com:8443'],
    });
    expect(loadConfig(base).apiKeys[0]).not.toHaveProperty('forwardTo');
    for (const bad of ['https://dev.example.com/hook', 'ftp://dev.example.com', 'https://u:p@dev.example.com', 'dev.example.com']) {
      expect(problems(withForward([bad]))).toEqual([
        expect.stringMatching(/^SLUICE_API_KEYS\.0\.forward_to\.0: must be an origin a pull may forward to/),
      ]);
    }
  });
});

describe('an API key limited to queues', () => {
  const [entry] = JSON.parse(secrets.apiKeysJson) as object[];
  const withQueues = (queues: unknown) => ({ ...base, SLUICE_API_KEYS: JSON.stringify([{ ...entry, queues }]) });

  it('reads `queues` as names and prefixes ending in *', () => {
    expect(loadConfig(withQueues(['billing', 'reports-*'])).apiKeys[0]).toMatchObject({ queues: ['billing', 'reports-*'] });
    expect(loadConfig(base).apiKeys[0]).not.toHaveProperty('queues');
  });

  it('refuses an empty list, a * anywhere but at the end, and what is no queue name, each in one line naming it', () => {
    const cases: Array<[unknown, RegExp]> = [
      [[], /^SLUICE_API_KEYS\.0\.queues: must list at least one queue \(leave `queues` out for a key of every queue\)$/],
      [['re*ports'], /^SLUICE_API_KEYS\.0\.queues\.0: may hold `\*` only at its end/],
      [['*-reports'], /^SLUICE_API_KEYS\.0\.queues\.0: may hold `\*` only at its end/],
      [['reports**'], /^SLUICE_API_KEYS\.0\.queues\.0: may hold `\*` only at its end/],
      [['billing', '*'], /^SLUICE_API_KEYS\.0\.queues\.1: is `\*` alone, every queue: leave `queues` out/],
      [[''], /^SLUICE_API_KEYS\.0\.queues\.0: is empty$/],
      [['bil ling'], /^SLUICE_API_KEYS\.0\.queues\.0: is not a queue name/],
      [['-billing'], /^SLUICE_API_KEYS\.0\.queues\.0: is not a queue name/],
      [['q'.repeat(200)], /^SLUICE_API_KEYS\.0\.queues\.0: is longer than 128 characters/],
      ['billing', /^SLUICE_API_KEYS\.0\.queues: /],
      [[7], /^SLUICE_API_KEYS\.0\.queues\.0: /],
    ];
    for (const [queues, message] of cases)
      expect(problems(withQueues(queues)), JSON.stringify(queues)).toEqual([expect.stringMatching(message)]);
  });
});

describe('SLUICE_DB_LOCATION_HINT', () => {
  it('takes a Cloudflare location hint, and refuses anything else in one line', () => {
    expect(loadConfig({ ...base, SLUICE_DB_LOCATION_HINT: 'weur' }).dbLocationHint).toBe('weur');
    expect(loadConfig(base).dbLocationHint).toBeNull();
    expect(problems({ ...base, SLUICE_DB_LOCATION_HINT: 'eu-central-1' })).toEqual([
      expect.stringMatching(
        /^SLUICE_DB_LOCATION_HINT: must be one of Cloudflare's location hints: wnam, enam, sam, weur, eeur, apac, oc, afr, me/,
      ),
    ]);
  });
});
