/** Development credentials, made once and kept in `.sluice/dev.json` so they survive restarts. */
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { JWK } from 'jose';
import { type ApiKeyEntry, generateApiKey } from '../security/api-keys.ts';
import { generateSigningJwk } from '../security/keyring.ts';

export interface DevSecrets {
  apiKey: string;
  apiKeyEntry: ApiKeyEntry;
  signingKey: JWK;
}

export async function loadDevSecrets(file: string): Promise<DevSecrets> {
  if (existsSync(file)) return JSON.parse(await readFile(file, 'utf8')) as DevSecrets;
  const { key, entry } = await generateApiKey('dev');
  const secrets: DevSecrets = { apiKey: key, apiKeyEntry: entry, signingKey: await generateSigningJwk('EdDSA', 'dev-1') };
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, JSON.stringify(secrets, null, 2), { mode: 0o600 });
  return secrets;
}

/** The Worker's variables for a local run. */
export function devVars(secrets: DevSecrets, databaseUrl: string, wsProxy: string): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    SLUICE_API_KEYS: JSON.stringify([secrets.apiKeyEntry]),
    SLUICE_SIGNING_KEYS: JSON.stringify({ keys: [secrets.signingKey] }),
    SLUICE_ALLOW_PRIVATE_TARGETS: 'true',
    SLUICE_NEON_WS_PROXY: wsProxy,
  };
}
