/** A real configuration for tests: generated keys, parsed by the same `loadConfig`. */
import type { JWK } from 'jose';
import { type Config, loadConfig } from '../../src/config.ts';
import { generateApiKey } from '../../src/security/api-keys.ts';
import { generateSigningJwk } from '../../src/security/keyring.ts';

export interface TestSecrets {
  apiKey: string;
  readKey: string;
  /** A pull consumer's: `tasks:pull` only. */
  pullKey: string;
  apiKeysJson: string;
  signingJwk: JWK;
}

export async function makeSecrets(): Promise<TestSecrets> {
  const writer = await generateApiKey('test', ['tasks:write', 'tasks:read']);
  const reader = await generateApiKey('reader', ['tasks:read']);
  const puller = await generateApiKey('puller', ['tasks:pull']);
  return {
    apiKey: writer.key,
    readKey: reader.key,
    pullKey: puller.key,
    apiKeysJson: JSON.stringify([writer.entry, reader.entry, puller.entry]),
    signingJwk: await generateSigningJwk('EdDSA', 'test-1'),
  };
}

export function testEnv(secrets: TestSecrets, databaseUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    SLUICE_API_KEYS: secrets.apiKeysJson,
    SLUICE_SIGNING_KEYS: JSON.stringify({ keys: [secrets.signingJwk] }),
    SLUICE_ALLOW_PRIVATE_TARGETS: 'true',
    ...extra,
  };
}

export async function testConfig(
  databaseUrl: string,
  extra: Record<string, string> = {},
): Promise<{ config: Config; secrets: TestSecrets }> {
  const secrets = await makeSecrets();
  return { config: loadConfig(testEnv(secrets, databaseUrl, extra)), secrets };
}
