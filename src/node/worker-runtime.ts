/**
 * Runs the real Worker (`src/index.ts`, bundled as wrangler would) inside workerd through
 * Miniflare. Used by the local start and by the worker-tier tests.
 */
import { builtinModules } from 'node:module';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';
import { Miniflare } from 'miniflare';

export const WORKER_ENTRY = fileURLToPath(new URL('../index.ts', import.meta.url));
/** Keep in step with `compatibility_date` and `compatibility_flags` in wrangler.toml. */
export const COMPATIBILITY_DATE = '2026-07-01';
export const COMPATIBILITY_FLAGS = ['enable_request_signal', 'nodejs_compat'];

export interface RunningWorker {
  /** Base URL of the Worker, e.g. `http://127.0.0.1:8787`. */
  url: string;
  /** Fires the cron trigger once and waits for the dispatcher run to finish. */
  scheduled(): Promise<void>;
  close(): Promise<void>;
}

const NODE_BUILTINS = new Set(builtinModules.filter((m) => !m.startsWith('_')));

/**
 * Node's built-in modules, which workerd provides under `nodejs_compat` (`pg`, for the
 * Hyperdrive path, needs them), left to the runtime as wrangler leaves them: a CommonJS
 * `require` of one becomes an import of `node:<name>` (a bundle of ES modules has no `require`).
 */
const nodeBuiltins: Plugin = {
  name: 'node-builtins',
  setup(build) {
    build.onResolve({ filter: /^[a-z_:/]+$/ }, (args) => {
      const name = args.path.replace(/^node:/, '');
      if (!NODE_BUILTINS.has(name)) return undefined;
      if (args.namespace === 'node-builtin') return { path: `node:${name}`, external: true };
      return { path: name, namespace: 'node-builtin' };
    });
    build.onLoad({ filter: /.*/, namespace: 'node-builtin' }, (args) => ({
      contents: `import * as m from 'node:${args.path}'; export * from 'node:${args.path}'; export default m.default ?? m;`,
      loader: 'js',
    }));
  },
};

/**
 * Bundles the Worker to one ES module, the way wrangler does (browser platform, workerd
 * conditions, Node's built-ins left to the runtime). `entry`: another module that wraps the
 * Worker (a benchmark's counters).
 */
export async function bundleWorker(entry = WORKER_ENTRY): Promise<string> {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    conditions: ['workerd', 'worker', 'browser'],
    target: 'es2022',
    external: ['cloudflare:*'],
    plugins: [nodeBuiltins],
    write: false,
    logLevel: 'silent',
  });
  return result.outputFiles[0]?.text ?? '';
}

interface ScheduledFetcher {
  scheduled(options: { cron: string; scheduledTime: Date }): Promise<{ outcome: string }>;
}

export async function startWorker(options: {
  vars: Record<string, string>;
  port?: number;
  script?: string;
  /** A folder for the Durable Objects' storage (their alarms included), kept across restarts; default in memory. */
  persist?: string;
  /**
   * The Postgres a `HYPERDRIVE` binding reaches (`SLUICE_DATABASE_PATH=hyperdrive`): Miniflare's
   * binding connects straight to it (no pool, no cache, as wrangler dev's does).
   */
  hyperdrive?: string;
}): Promise<RunningWorker> {
  const script = options.script ?? (await bundleWorker());
  const mf = new Miniflare({
    modules: true,
    script,
    compatibilityDate: COMPATIBILITY_DATE,
    compatibilityFlags: COMPATIBILITY_FLAGS,
    bindings: options.vars,
    // As wrangler.toml declares them: SQLite-backed, so they run on the free plan too.
    durableObjects: {
      SCHEDULER: { className: 'Scheduler', useSQLite: true },
      PUSHERS: { className: 'Pusher', useSQLite: true },
    },
    ...(options.persist ? { durableObjectsPersist: options.persist } : {}),
    ...(options.hyperdrive ? { hyperdrives: { HYPERDRIVE: options.hyperdrive } } : {}),
    host: '127.0.0.1',
    port: options.port ?? 0,
    unsafeTriggerHandlers: true,
  });
  const url = (await mf.ready).toString().replace(/\/$/, '');
  return {
    url,
    async scheduled() {
      const worker = (await mf.getWorker()) as unknown as ScheduledFetcher;
      const result = await worker.scheduled({ cron: '* * * * *', scheduledTime: new Date() });
      if (result.outcome !== 'ok') throw new Error(`scheduled() ended with outcome ${result.outcome}`);
    },
    close: () => mf.dispose(),
  };
}
