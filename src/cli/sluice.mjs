#!/usr/bin/env node
// The `sluice` bin (package.json "bin"). Plain JavaScript, so any runtime can start it.
//
// Why a shim and not a built file: the CLI is TypeScript (src/cli/main.ts) and runs as it is
// wherever types can be stripped: Bun, Deno, and Node ≥ 22.18, which includes the project's own
// Node 22 that `npx` and `npm run` put first on the PATH. Only a Node that cannot (the system's
// Node 20, say) needs help, and it gets the project's Node 22 (node_modules/.bin/node) to run
// the same file. No build step means nothing generated at install time that could go stale
// while the source changes, and no script that `npm install` must run.
const canStripTypes =
  typeof globalThis.Bun !== 'undefined' || typeof globalThis.Deno !== 'undefined' || Boolean(globalThis.process?.features?.typescript);

if (canStripTypes) {
  await import('./main.ts');
} else {
  await runUnderProjectNode();
}

async function runUnderProjectNode() {
  // biome-ignore-start lint/correctness/noNodejsModules: this path runs only on Node.
  const { spawn } = await import('node:child_process');
  const { existsSync, realpathSync } = await import('node:fs');
  const { constants } = await import('node:os');
  const { dirname, join } = await import('node:path');
  const { fileURLToPath } = await import('node:url');
  // biome-ignore-end lint/correctness/noNodejsModules: this path runs only on Node.
  const here = dirname(realpathSync(fileURLToPath(import.meta.url)));
  const node = join(here, '..', '..', 'node_modules', '.bin', 'node');
  if (!existsSync(node)) {
    process.stderr.write(
      `sluice: Node ${process.version} cannot run TypeScript: run sluice with Node >= 22.18, Bun or Deno, ` +
        'or run npm install in the project so that its own Node 22 is there\n',
    );
    process.exit(2);
  }
  const child = spawn(node, [join(here, 'main.ts'), ...process.argv.slice(2)], { stdio: 'inherit' });
  // Ctrl-C reaches both processes from the terminal (the CLI takes a second one calmly); a
  // signal sent to this process alone is passed on.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => process.exit(code ?? 128 + (constants.signals[signal] ?? 0)));
}
