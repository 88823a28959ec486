/**
 * A user's Worker (a push receiver, not Sluice): bundled from its entry as wrangler bundles
 * one (esbuild, the workerd conditions) and run in workerd by Miniflare.
 */
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';
import { freePort } from '../../src/node/postgres.ts';
import { COMPATIBILITY_DATE } from '../../src/node/worker-runtime.ts';

export interface UserWorker {
  url: string;
  close(): Promise<void>;
}

/** `entry` is resolved, with its imports, from `dir` (default: the current directory). */
export async function startUserWorker(options: { entry: string; dir?: string; bindings: Record<string, string> }): Promise<UserWorker> {
  const bundle = await build({
    ...(options.dir === undefined ? {} : { absWorkingDir: options.dir }),
    entryPoints: [options.entry],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    conditions: ['workerd', 'worker', 'browser'],
    write: false,
    logLevel: 'silent',
  });
  const mf = new Miniflare({
    modules: true,
    script: bundle.outputFiles[0]!.text,
    compatibilityDate: COMPATIBILITY_DATE,
    bindings: options.bindings,
    host: '127.0.0.1',
    port: await freePort(),
  });
  return { url: (await mf.ready).toString().replace(/\/$/, ''), close: () => mf.dispose() };
}
