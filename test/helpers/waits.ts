/**
 * An endpoint that plays parent and child for the waits tests, over real HTTP against a real
 * Sluice (the Node server or the Worker): a parent's first push enqueues its children (with
 * `parent_id`), keeps the lease and waits for them; its push after the wait (`Sluice-Resume`)
 * answers 200. A child answers 200, or, told to, becomes a parent itself.
 */
import type { ReceivedPush, Reply, TestEndpoint } from './endpoint.ts';

export interface Family {
  /** Children to enqueue, as enqueue bodies without `url` and `parent_id`. */
  children: Array<Record<string, unknown> & { body?: unknown }>;
}

export interface WaitOutcome {
  taskId: string;
  status: number;
  answer: { code?: string; detail?: string; lent_queue?: boolean; waiting_on?: string[] };
}

export function playFamilies(endpoint: TestEndpoint, sluiceUrl: () => string, apiKey: string): { waits: WaitOutcome[] } {
  const waits: WaitOutcome[] = [];
  endpoint.reply(async (push: ReceivedPush): Promise<Reply> => {
    const family = JSON.parse(push.text || '{}') as { family?: Family };
    if (!family.family || push.headers['sluice-resume'] !== undefined) return { status: 200, body: 'done' };
    const taskId = String(push.headers['sluice-task-id']);
    for (const child of family.family.children) {
      const res = await fetch(`${sluiceUrl()}/v1/tasks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url: `${endpoint.url}/child`, ...child, parent_id: taskId }),
      });
      if (res.status !== 201) throw new Error(`enqueueing a child: ${res.status} ${await res.text()}`);
    }
    const res = await fetch(`${sluiceUrl()}/v1/leases/${push.headers['sluice-lease-id']}/wait`, {
      method: 'POST',
      headers: { authorization: `Bearer ${push.headers['sluice-lease-token']}`, 'content-type': 'application/json' },
      body: '{}',
    });
    waits.push({ taskId, status: res.status, answer: (await res.json()) as WaitOutcome['answer'] });
    // Refused: this push ends the task itself.
    if (res.status !== 200) return { status: 200, body: 'could not wait' };
    return { status: 202, headers: { 'sluice-ack': 'lease' } };
  });
  return { waits };
}
