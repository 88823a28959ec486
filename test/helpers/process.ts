/** Real server processes for tests: started from the project's root, ready once they say so. */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The project's own binaries: node 22, bun, deno. */
export const BIN = `${ROOT}node_modules/.bin`;

/** Spawns `command args` with `env` added; resolves once its output contains `ready` (else kills it). */
export async function spawnReady(command: string, args: string[], env: Record<string, string>, ready: string): Promise<ChildProcess> {
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { ...process.env, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const started = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${command} did not start: ${output}`)), 30_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes(ready)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${command} exited with ${code}: ${output}`));
    });
  });
  // One that never got ready is not left running.
  await started.catch((error: unknown) => {
    child.kill('SIGKILL');
    throw error;
  });
  return child;
}
