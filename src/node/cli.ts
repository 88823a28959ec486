/**
 * `npm run db:migrate | keys:api | keys:signing`: operator commands.
 *   db:migrate                     applies migrations/ to $DATABASE_URL
 *   keys:api [name] [scope…] [--queues 'a,b-*']   prints a new API key and its SLUICE_API_KEYS entry (limited to those queues)
 *   keys:signing [EdDSA|ES256]     prints a new private JWK for SLUICE_SIGNING_KEYS
 *   keys:webhook <endpoint url>    prints the endpoint's Standard Webhooks secret (needs $SLUICE_WEBHOOK_SECRET)
 */

import { queuePatternProblem } from '../config-fields.ts';
import { webhookSecretBytes } from '../protocol/webhook.ts';
import { generateApiKey, SCOPES, type Scope } from '../security/api-keys.ts';
import { generateSigningJwk } from '../security/keyring.ts';
import { endpointWebhookSecret, webhookEndpoint } from '../security/webhook-secrets.ts';
import { migrateDatabase } from './migrations.ts';

const [command, ...args] = process.argv.slice(2);
const apiKeyArgs = command === 'api-key' ? queuesFlag(args) : { rest: args, queues: null };

switch (command) {
  case 'migrate': {
    const url = process.env.DATABASE_URL;
    if (!url) fail('DATABASE_URL is not set: export the Postgres connection string first');
    // A database that refuses (a user, a password, no such database, nothing listening) is one line.
    const applied = await migrateDatabase(url).catch((error: unknown) =>
      fail(`sluice: DATABASE_URL: migrating failed: ${error instanceof Error ? error.message : String(error)}`),
    );
    console.log(applied.length ? `applied: ${applied.join(', ')}` : 'the database is up to date');
    break;
  }
  case 'api-key': {
    const [name = 'default', ...scopes] = apiKeyArgs.rest;
    const bad = scopes.filter((s) => !SCOPES.includes(s as Scope));
    if (bad.length) fail(`unknown scope ${bad.join(', ')}; scopes are ${SCOPES.join(', ')}`);
    const made = await generateApiKey(name, scopes.length ? (scopes as Scope[]) : SCOPES);
    const { key } = made;
    const entry = apiKeyArgs.queues ? { ...made.entry, queues: apiKeyArgs.queues } : made.entry;
    console.log(`API key (give it to the client; it is not stored anywhere):\n  ${key}\n`);
    console.log(`Entry for SLUICE_API_KEYS (a JSON array of such entries):\n  ${JSON.stringify(entry)}`);
    break;
  }
  case 'signing-key': {
    const alg = args[0] ?? 'EdDSA';
    if (alg !== 'EdDSA' && alg !== 'ES256') fail('the algorithm is EdDSA or ES256');
    const jwk = await generateSigningJwk(alg);
    console.log(`Private key for SLUICE_SIGNING_KEYS (first key signs; keep the old one second while rotating):\n`);
    console.log(JSON.stringify({ keys: [jwk] }));
    break;
  }
  case 'webhook-secret': {
    const master = process.env.SLUICE_WEBHOOK_SECRET;
    if (!master) fail('SLUICE_WEBHOOK_SECRET is not set: export the master secret first');
    const url = args[0];
    if (!url || !URL.canParse(url)) fail('usage: keys:webhook <the endpoint URL, e.g. https://example.com/hooks/sluice>');
    console.log(
      `Standard Webhooks secret for ${webhookEndpoint(url)} (configure it at that endpoint):\n  ${await endpointWebhookSecret(webhookSecretBytes(master), url)}`,
    );
    const next = process.env.SLUICE_WEBHOOK_SECRET_NEXT;
    if (next)
      console.log(`Its next secret, under SLUICE_WEBHOOK_SECRET_NEXT:\n  ${await endpointWebhookSecret(webhookSecretBytes(next), url)}`);
    break;
  }
  default:
    fail('usage: cli.ts migrate | api-key [name] [scope…] [--queues a,b-*] | signing-key [EdDSA|ES256] | webhook-secret <url>');
}

/**
 * `--queues 'billing,reports-*'` (or `--queues=…`), anywhere among the arguments: the queues the
 * key may use, checked as SLUICE_API_KEYS checks them; the other arguments as they were.
 */
function queuesFlag(all: readonly string[]): { rest: string[]; queues: string[] | null } {
  const rest: string[] = [];
  let queues: string[] | null = null;
  for (let i = 0; i < all.length; i++) {
    const arg = all[i]!;
    if (arg !== '--queues' && !arg.startsWith('--queues=')) {
      rest.push(arg);
      continue;
    }
    const value = arg === '--queues' ? all[++i] : arg.slice('--queues='.length);
    if (value === undefined) fail("--queues takes a list: --queues 'billing,reports-*'");
    queues = value
      .split(',')
      .map((q) => q.trim())
      .filter((q) => q !== '');
    if (queues.length === 0) fail("--queues lists no queue: give names, or prefixes ending in * (--queues 'billing,reports-*')");
    for (const q of queues) {
      const problem = queuePatternProblem(q);
      if (problem) fail(`--queues: ${JSON.stringify(q)} ${problem}`);
    }
  }
  return { rest, queues };
}

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}
