/**
 * Sluice's configuration: wrangler `[vars]` and secrets on Workers, environment variables
 * elsewhere (docs/DESIGN.md §7). Parsed once per environment with zod into a frozen `Config`;
 * every message names the variable and the fix.
 */
import type { JWK } from 'jose';
import { z } from 'zod';
import {
  apiKeysSchema,
  blankToUndefined,
  explain,
  int,
  json,
  LOCATION_HINTS,
  type LocationHint,
  NAME_PATTERN,
  parseRetention,
  publicOrigin,
  type QueueOptions,
  queueOptionsSchema,
  signingKeysSchema,
  webhookSecret,
} from './config-fields.ts';
import { ConfigError } from './core/errors.ts';
import { fieldIssues } from './core/issues.ts';
import { pickQueueSettings, type QueueLimits } from './core/queue-settings.ts';
import { DEFAULT_REST_AFTER_MS } from './core/rest.ts';
import { type Backoff, DEFAULT_LEASE_MS, DEFAULT_RETRY, DEFAULT_TIMEOUT_MS, LIMITS } from './core/types.ts';
import { FORWARD_ISSUER } from './protocol/signature.ts';
import type { ApiKeyEntry } from './security/api-keys.ts';

/** A queue's effective defaults for the tasks enqueued into it. */
export interface QueueDefaults {
  url: string | null;
  keyFrom: string | null;
  maxAttempts: number;
  backoff: Backoff;
  leaseMs: number;
  timeoutMs: number;
}

export interface Config {
  /**
   * How the Worker reaches Postgres: Neon's serverless driver, or `pg` through a Hyperdrive
   * binding (src/db/workers.ts). The Node server always uses `pg` on `databaseUrl`.
   */
  databasePath: 'neon' | 'hyperdrive';
  /** The Postgres connection string: DATABASE_URL, or the Hyperdrive binding's. */
  databaseUrl: string;
  apiKeys: readonly ApiKeyEntry[];
  signingKeys: { keys: JWK[] };
  webhookSecret: Uint8Array<ArrayBuffer> | null;
  /** During a rotation: the next master; pushes carry signatures under both. */
  webhookSecretNext: Uint8Array<ArrayBuffer> | null;
  issuer: string;
  leaseMs: number;
  /** The longest a lease may be held in all, heartbeats included. */
  maxLeaseMs: number;
  pushTimeoutMs: number;
  maxClaimBatch: number;
  /** Pushes in flight per dispatcher (per shard on Workers). */
  dispatchParallelism: number;
  /** Workers: pusher Durable Objects the scheduler may wake at once. */
  dispatchShards: number;
  /** Outgoing requests one dispatcher run may make (Workers count subrequests per invocation). */
  maxSubrequests: number;
  /** Leased tasks across all queues at once; `null` = no cluster cap. */
  clusterCap: number | null;
  allowPrivateTargets: boolean;
  queues: Readonly<Record<string, QueueOptions>>;
  /** The claim-time settings of `queues`, as the claim statement takes them (JSON). */
  claimQueuesJson: string;
  /** The queues `queues` makes adaptive (a run-time override may change any), for the settle. */
  adaptiveQueues: readonly string[];
  /** How long finished tasks are kept before the dispatcher deletes them; `null` = for ever. */
  retentionMs: number | null;
  /** Workers: how API requests reach Postgres: Neon's HTTP query endpoint, or a WebSocket Pool. */
  apiDatabase: 'http' | 'websocket';
  /**
   * Where the Worker's Durable Objects (the scheduler and the pusher shards, which make nearly
   * every database round trip) are created: near the database. `null`: near their first caller.
   */
  dbLocationHint: LocationHint | null;
  /** Dev and tests only: `host:port/path` of a WebSocket→TCP proxy for the Neon driver. */
  neonWsProxy: string | null;
  /** GET /metrics: per queue, the keys holding the most slots that get series of their own. */
  metricsTopKeys: number;
  /** GET /metrics: the endpoint origins that get series of their own (those not healthy first, then the most failures). */
  metricsTopEndpoints: number;
  /** The longest a waiting pull goes without claiming again, whatever pokes it missed (src/api/pull.ts). */
  pullRecheckMs: number;
  /**
   * How long after the last work housekeeping goes on; then, with nothing due, the deployment
   * rests and sends Postgres nothing (core/rest.ts).
   */
  restAfterMs: number;
  /** Failures in a row (no connection, a timeout, a 5xx) that pause an endpoint origin; 0: never (0027_endpoints.sql). */
  endpointPauseAfter: number;
  /**
   * The origin browsers reach Sluice at (`SLUICE_PUBLIC_URL`), e.g. behind a reverse proxy that
   * rewrites Host; `null`: each request's own URL. The dashboard's forgery check expects it.
   */
  publicOrigin: string | null;
}

export type Env = Readonly<Record<string, unknown>>;

/** The environment's variables; DATABASE_URL is required unless the Worker reaches Postgres through Hyperdrive. */
const envObject = z.object({
  DATABASE_URL: z.string().min(1, 'is required').optional(),
  SLUICE_DATABASE_PATH: z
    .enum(['neon', 'hyperdrive'], {
      error: 'must be "neon" (the Neon serverless driver) or "hyperdrive" (pg through a HYPERDRIVE binding)',
    })
    .default('neon'),
  // A Hyperdrive binding (wrangler.toml `[[hyperdrive]]`): its connection string reaches the pool.
  HYPERDRIVE: z.object({ connectionString: z.string().min(1) }, { error: 'must be a Hyperdrive binding' }).optional(),
  SLUICE_API_KEYS: json(apiKeysSchema),
  SLUICE_SIGNING_KEYS: json(signingKeysSchema),
  SLUICE_WEBHOOK_SECRET: webhookSecret(),
  SLUICE_WEBHOOK_SECRET_NEXT: webhookSecret(),
  SLUICE_ISSUER: z
    .string()
    .min(1)
    .refine(
      (iss) => iss !== FORWARD_ISSUER,
      `must not be "${FORWARD_ISSUER}": that issuer marks forwarded pushes, which production receivers refuse`,
    )
    .default('sluice'),
  SLUICE_LEASE_MS: int(1_000, LIMITS.maxLeaseMs).default(DEFAULT_LEASE_MS),
  SLUICE_PUSH_TIMEOUT_MS: int(100, LIMITS.maxLeaseMs).default(DEFAULT_TIMEOUT_MS),
  SLUICE_MAX_LEASE_MS: int(1_000, 7 * 24 * 3_600_000).default(LIMITS.maxLeaseMs),
  SLUICE_MAX_CLAIM_BATCH: int(1, 1_000).default(100),
  // Default: `DEFAULT_PARALLELISM`, by where the dispatcher runs.
  SLUICE_DISPATCH_PARALLELISM: int(1, 1_000).optional(),
  SLUICE_DISPATCH_SHARDS: int(1, 256).default(4),
  SLUICE_MAX_SUBREQUESTS: int(20, 1_000_000).default(1_000),
  SLUICE_CLUSTER_CAP: int(1, 1_000_000).optional(),
  SLUICE_ALLOW_PRIVATE_TARGETS: z.union([z.boolean(), z.stringbool()]).default(false),
  SLUICE_QUEUES: json(z.record(z.string().regex(NAME_PATTERN, 'is not a valid queue name'), queueOptionsSchema)).default({}),
  SLUICE_NEON_WS_PROXY: z.string().min(1).optional(),
  SLUICE_API_DATABASE: z.enum(['http', 'websocket']).default('http'),
  SLUICE_DB_LOCATION_HINT: z
    .enum(LOCATION_HINTS, {
      error: `must be one of Cloudflare's location hints: ${LOCATION_HINTS.join(', ')} (docs/operations.md "Placing the dispatcher near the database")`,
    })
    .optional(),
  SLUICE_METRICS_TOP_KEYS: int(0, 1_000).default(10),
  SLUICE_METRICS_TOP_ENDPOINTS: int(0, 1_000).default(50),
  SLUICE_PULL_RECHECK_MS: int(100, 3_600_000).default(1_000),
  SLUICE_REST_AFTER_MS: int(1_000, 86_400_000).default(DEFAULT_REST_AFTER_MS),
  SLUICE_ENDPOINT_PAUSE_AFTER: int(0, 1_000_000).default(10),
  SLUICE_PUBLIC_URL: publicOrigin(),
  SLUICE_RETENTION: z
    .string()
    .default('7d')
    .transform((text, ctx) => {
      const ms = parseRetention(text);
      if (ms === undefined) {
        ctx.addIssue({
          code: 'custom',
          message: 'must be a duration of at least a minute, such as 7d, 12h, 30m or 3600000 (ms), or "forever"',
        });
        return z.NEVER;
      }
      return ms;
    }),
});

function checkTogether(env: z.output<typeof envObject>, ctx: z.RefinementCtx): void {
  if (env.SLUICE_DATABASE_PATH === 'hyperdrive' && !env.HYPERDRIVE) {
    ctx.addIssue({
      code: 'custom',
      path: ['SLUICE_DATABASE_PATH'],
      message:
        'is "hyperdrive", but there is no HYPERDRIVE binding: declare [[hyperdrive]] binding = "HYPERDRIVE" in wrangler.toml (Workers only; docs/operations.md "Hyperdrive")',
    });
  }
  if (env.SLUICE_WEBHOOK_SECRET_NEXT && !env.SLUICE_WEBHOOK_SECRET) {
    ctx.addIssue({
      code: 'custom',
      path: ['SLUICE_WEBHOOK_SECRET_NEXT'],
      message: 'is for rotating SLUICE_WEBHOOK_SECRET, which is not set',
    });
  }
  if (env.SLUICE_PUSH_TIMEOUT_MS >= env.SLUICE_LEASE_MS) {
    ctx.addIssue({
      code: 'custom',
      path: ['SLUICE_PUSH_TIMEOUT_MS'],
      message: `must be shorter than SLUICE_LEASE_MS (${env.SLUICE_LEASE_MS}), so a slot is never handed on while its push is open`,
    });
  }
  // A lease token is good for SLUICE_MAX_LEASE_MS from its claim: a longer lease would outlive
  // the token its holder completes it with.
  const maxLease = `must be at most SLUICE_MAX_LEASE_MS (${env.SLUICE_MAX_LEASE_MS}): a push's lease token is good for that long`;
  if (env.SLUICE_LEASE_MS > env.SLUICE_MAX_LEASE_MS) {
    ctx.addIssue({ code: 'custom', path: ['SLUICE_LEASE_MS'], message: maxLease });
  }
  for (const [name, q] of Object.entries(env.SLUICE_QUEUES ?? {})) {
    if (q.lease_ms !== undefined && q.lease_ms > env.SLUICE_MAX_LEASE_MS) {
      ctx.addIssue({ code: 'custom', path: ['SLUICE_QUEUES', name, 'lease_ms'], message: maxLease });
    }
    const lease = q.lease_ms ?? env.SLUICE_LEASE_MS;
    const timeout = q.timeout_ms ?? env.SLUICE_PUSH_TIMEOUT_MS;
    if (timeout >= lease) {
      ctx.addIssue({
        code: 'custom',
        path: ['SLUICE_QUEUES', name, 'timeout_ms'],
        message: `must be shorter than the lease (${lease} ms)`,
      });
    }
  }
}

const envSchema = envObject.superRefine(checkTogether);
/** With Neon's driver (and on Node), DATABASE_URL is required: said with the other problems, not after them. */
const neonEnvSchema = envObject
  .extend({ DATABASE_URL: z.string({ error: 'is required: the Postgres connection string' }).min(1, 'is required') })
  .superRefine(checkTogether);

/** Where a dispatcher runs: a Worker's pusher shard, or the Node server's process. */
export type DispatchHost = 'worker' | 'node';

/**
 * Pushes in flight per dispatcher when `SLUICE_DISPATCH_PARALLELISM` is not set. Workers allow
 * 6 connections waiting for response headers per invocation (an open database socket no longer
 * counts): 6 per shard. A Node process has no such cap, and a push in flight costs a socket, not
 * a thread: more places mean claim passes and settles of many tasks each.
 */
export const DEFAULT_PARALLELISM: Readonly<Record<DispatchHost, number>> = Object.freeze({ worker: 6, node: 64 });

const cache: Record<DispatchHost, WeakMap<object, Config>> = { worker: new WeakMap(), node: new WeakMap() };

/**
 * Parses the environment once per env object, with the defaults of where it runs (`host`);
 * throws `ConfigError` naming every problem.
 */
export function loadConfig(env: Env, host: DispatchHost = 'worker'): Config {
  const cached = cache[host].get(env);
  if (cached) return cached;
  const parsed = (env.SLUICE_DATABASE_PATH === 'hyperdrive' ? envSchema : neonEnvSchema).safeParse(blankToUndefined(env));
  if (!parsed.success) throw new ConfigError(fieldIssues(parsed.error).map(explain));
  const e = parsed.data;
  const config: Config = Object.freeze({
    databasePath: e.SLUICE_DATABASE_PATH,
    databaseUrl: e.SLUICE_DATABASE_PATH === 'hyperdrive' ? (e.HYPERDRIVE?.connectionString as string) : (e.DATABASE_URL as string),
    apiKeys: Object.freeze(e.SLUICE_API_KEYS),
    signingKeys: e.SLUICE_SIGNING_KEYS,
    webhookSecret: e.SLUICE_WEBHOOK_SECRET,
    webhookSecretNext: e.SLUICE_WEBHOOK_SECRET_NEXT,
    issuer: e.SLUICE_ISSUER,
    leaseMs: e.SLUICE_LEASE_MS,
    maxLeaseMs: e.SLUICE_MAX_LEASE_MS,
    pushTimeoutMs: e.SLUICE_PUSH_TIMEOUT_MS,
    maxClaimBatch: e.SLUICE_MAX_CLAIM_BATCH,
    dispatchParallelism: e.SLUICE_DISPATCH_PARALLELISM ?? DEFAULT_PARALLELISM[host],
    dispatchShards: e.SLUICE_DISPATCH_SHARDS,
    maxSubrequests: e.SLUICE_MAX_SUBREQUESTS,
    clusterCap: e.SLUICE_CLUSTER_CAP ?? null,
    allowPrivateTargets: e.SLUICE_ALLOW_PRIVATE_TARGETS,
    queues: Object.freeze(e.SLUICE_QUEUES),
    claimQueuesJson: claimQueuesJson(e.SLUICE_QUEUES),
    adaptiveQueues: Object.freeze(adaptiveQueues(e.SLUICE_QUEUES)),
    apiDatabase: e.SLUICE_API_DATABASE,
    dbLocationHint: e.SLUICE_DB_LOCATION_HINT ?? null,
    metricsTopKeys: e.SLUICE_METRICS_TOP_KEYS,
    metricsTopEndpoints: e.SLUICE_METRICS_TOP_ENDPOINTS,
    pullRecheckMs: e.SLUICE_PULL_RECHECK_MS,
    restAfterMs: e.SLUICE_REST_AFTER_MS,
    endpointPauseAfter: e.SLUICE_ENDPOINT_PAUSE_AFTER,
    publicOrigin: e.SLUICE_PUBLIC_URL,
    retentionMs: e.SLUICE_RETENTION,
    neonWsProxy: e.SLUICE_NEON_WS_PROXY ?? null,
  });
  cache[host].set(env, config);
  return config;
}

/** What only the Node server reads (`npm run serve`): where it listens, and its fallback poll. */
export interface ServeOptions {
  port: number;
  host: string;
  /** The longest the dispatcher sleeps when nothing is due (its fallback poll). */
  pollIntervalMs: number;
}

const serveSchema = z.object({
  PORT: int(0, 65_535).default(8787),
  HOST: z.string().min(1).default('127.0.0.1'),
  SLUICE_POLL_INTERVAL_MS: int(100, 3_600_000).default(30_000),
});

/** The Node server's own variables; throws `ConfigError` naming every problem. */
export function loadServeOptions(env: Env): ServeOptions {
  const parsed = serveSchema.safeParse(blankToUndefined(env));
  if (!parsed.success) throw new ConfigError(fieldIssues(parsed.error));
  return { port: parsed.data.PORT, host: parsed.data.HOST, pollIntervalMs: parsed.data.SLUICE_POLL_INTERVAL_MS };
}

/** The defaults a queue gives its tasks: the queue's options, else the global ones. */
export function queueDefaults(config: Config, queue: string): QueueDefaults {
  const q = config.queues[queue] ?? {};
  const b = q.backoff ?? {};
  return {
    url: q.url ?? null,
    keyFrom: q.key_from ?? null,
    maxAttempts: q.max_attempts ?? DEFAULT_RETRY.maxAttempts,
    backoff: {
      initialMs: b.initial_ms ?? DEFAULT_RETRY.backoff.initialMs,
      maxMs: b.max_ms ?? DEFAULT_RETRY.backoff.maxMs,
      factor: b.factor ?? DEFAULT_RETRY.backoff.factor,
      jitter: b.jitter ?? DEFAULT_RETRY.backoff.jitter,
    },
    leaseMs: q.lease_ms ?? config.leaseMs,
    timeoutMs: q.timeout_ms ?? config.pushTimeoutMs,
  };
}

/** The environment's adaptive queues (a run-time override may change any), for the settle. */
function adaptiveQueues(queues: Readonly<Record<string, QueueOptions>>): string[] {
  return Object.entries(queues)
    .filter(([, q]) => q.adaptive === true)
    .map(([name]) => name);
}

/** The environment's claim-time queue settings, as the claim statement takes them. */
function claimQueuesJson(queues: Readonly<Record<string, QueueOptions>>): string {
  const out: Record<string, QueueLimits> = {};
  for (const [name, q] of Object.entries(queues)) out[name] = pickQueueSettings(q);
  return JSON.stringify(out);
}

/** A rate as the start line says it: `10/1000 ms`, with `burst 50` when it has one. */
const rateText = (r: { limit: number; period_ms: number; burst?: number | undefined }) =>
  `${r.limit}/${r.period_ms} ms${r.burst === undefined ? '' : ` burst ${r.burst}`}`;

/**
 * The effective limits, one line, for the dispatcher's start-up log. Pusher shards are the
 * Worker's (`SLUICE_DISPATCH_SHARDS`): a Node server, which has none, does not name them.
 */
export function describeLimits(config: Config, path: 'worker' | 'node'): string {
  return [
    `lease ${config.leaseMs} ms`,
    `push timeout ${config.pushTimeoutMs} ms`,
    `claim batch ${config.maxClaimBatch}`,
    `parallelism ${config.dispatchParallelism}`,
    ...(path === 'worker' ? [`shards ${config.dispatchShards}`] : []),
    `cluster cap ${config.clusterCap ?? 'none'}`,
    ...Object.entries(config.queues).map(([name, q]) => {
      const limits = [
        `concurrency ${q.concurrency ?? '∞'}`,
        `key_concurrency ${q.key_concurrency ?? '∞'}`,
        ...(q.key_from ? [`key_from ${q.key_from}`] : []),
        ...(q.priority ? [`priority ${q.priority}`] : []),
        ...(q.paused ? ['paused'] : []),
        ...(q.rate ? [`rate ${rateText(q.rate)}`] : []),
        ...(q.key_rate ? [`key_rate ${rateText(q.key_rate)}`] : []),
        ...(q.adaptive ? [`adaptive${q.adaptive_min === undefined ? '' : ` from ${q.adaptive_min}`}`] : []),
        ...(q.pull ? ['pulled'] : []),
      ];
      return `queue ${name}: ${limits.join(' ')}`;
    }),
  ].join(', ');
}
