/**
 * The ceiling for Sluice's push: a bare loop of Ed25519-signed HTTP POSTs to the same no-op
 * endpoint, in a process of its own (bare-push-loop.ts), with no queue and no database. Its
 * "enqueue" hands the jobs to that process; the clock runs from "go" to the N-th job handled at
 * the endpoint, as for Sluice's push.
 */
import { type ChildProcess, fork, type Serializable } from 'node:child_process';
import { BIN } from '../../test/helpers/process.ts';
import type { Contender } from './contender.ts';
import type { Endpoint } from './sluice-push.ts';

export function barePush(endpoint: Endpoint, inFlight: number): Contender {
  return {
    id: `L${inFlight}`,
    kind: 'bare signed-push loop',
    inFlight,
    label: `bare signed-push loop, ${inFlight} in flight`,
    config: `bench/compare/bare-push-loop.ts child process: ${inFlight} loops of node:http POSTs (keep-alive Agent) to the same local endpoint as Sluice push, each body signed with node:crypto Ed25519 (sign(null, body, key)) into a header; no database (the drain's database sits unused)`,
    role: 'ceiling',
    async open() {
      const child: ChildProcess = fork(new URL('./bare-push-loop.ts', import.meta.url), [endpoint.url, String(inFlight)], {
        execPath: `${BIN}/node`,
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      await new Promise<void>((resolve, reject) => {
        child.once('message', () => resolve());
        child.once('exit', (code) => reject(new Error(`the bare push loop exited with ${code}`)));
      });
      const send = (message: Serializable) =>
        new Promise<void>((resolve, reject) => child.send(message, (error) => (error ? reject(error) : resolve())));
      return {
        cpu: { pid: child.pid as number },
        enqueue: (jobs) => send({ jobs }),
        async enqueueOne() {
          throw new Error('the bare push loop has no queue: it only drains');
        },
        async start(handler) {
          endpoint.handler = handler;
          await send('go');
          return {
            async stop() {
              endpoint.handler = null;
            },
          };
        },
        async close() {
          if (child.exitCode !== null) return;
          const exited = new Promise((r) => child.once('exit', r));
          child.kill('SIGTERM');
          await exited;
        },
      };
    },
  };
}
