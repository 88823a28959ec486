/** `sluice lease release QUEUE LEASE --force`: an admin frees a stuck slot. */
import type { Command } from '../context.ts';
import { seg } from '../context.ts';
import { UsageError } from '../errors.ts';

export const leaseRelease: Command = {
  words: ['lease', 'release'],
  args: [{ name: 'QUEUE' }, { name: 'LEASE' }],
  flags: [{ name: 'force', help: 'confirm it: the holder may still be working on the task' }],
  summary: 'free a stuck slot (admin; needs --force)',
  details: [
    'The lease ends now: its task goes back to pending and its attempt is given back.',
    'The holder is not told: if it is still working, the task may run twice, and its later lease',
    'calls get 409 lease_lost. Hence --force. Find leases with `sluice status QUEUE`.',
    'Uses POST /v1/queues/QUEUE/leases/LEASE/release.',
  ].join('\n'),
  async run({ api, out }, { args, flags }) {
    const { QUEUE, LEASE } = args as { QUEUE: string; LEASE: string };
    if (!flags.has('force')) {
      throw new UsageError(
        `not released: lease ${LEASE}'s holder may still be working, and its task would then run twice. ` +
          'Add --force to release it anyway',
      );
    }
    const answer = await api.post<{ released: boolean; task_id: string; lease_id: string }>(
      `/v1/queues/${seg(QUEUE)}/leases/${seg(LEASE)}/release`,
    );
    out.result(answer, () => `released lease ${answer.lease_id}: task ${answer.task_id} is pending again, its attempt given back`);
  },
};
