/** Every command, in the order `sluice --help` lists them. */
import type { Command } from '../context.ts';
import { endpointCommands } from './endpoints.ts';
import { groupCommands } from './groups.ts';
import { keyCommands } from './keys.ts';
import { leaseRelease } from './lease.ts';
import { listen } from './listen.ts';
import { queueCommands } from './queues.ts';
import { status } from './status.ts';
import { tail } from './tail.ts';
import { taskCommands } from './tasks.ts';

export const COMMANDS: readonly Command[] = [
  status,
  ...queueCommands,
  ...keyCommands,
  leaseRelease,
  ...taskCommands,
  ...groupCommands,
  ...endpointCommands,
  tail,
  listen,
];
