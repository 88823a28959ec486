/**
 * Succeeded tasks per queue, for `status`. The queue views count only the live states (pending,
 * leased, dead: cheap, from partial indexes); succeeded tasks are counted now and then by a
 * dispatcher and published in GET /metrics as `sluice_tasks{status="succeeded"}`, so the CLI
 * reads them there, with the time they were counted. That needs a key with `metrics:read`
 * (or admin) of every queue; without one, the counts are simply not shown.
 */
import type { Api } from './api.ts';
import { ApiError } from './errors.ts';

export interface SucceededCounts {
  byQueue: Map<string, number>;
  /** When a dispatcher counted them; `null` before the first count. */
  countedAt: Date | null;
}

/** What `status` shows: the counts, or why there are none. */
export type Succeeded = { counts: SucceededCounts } | { unknown: string };

export async function readSucceeded(api: Api): Promise<Succeeded> {
  let text: string;
  try {
    text = await api.text('/metrics');
  } catch (error) {
    if (error instanceof ApiError && error.code === 'queue_not_allowed') {
      return { unknown: 'succeeded counts come from GET /metrics, which spans every queue: a key limited to queues may not read it' };
    }
    if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
      return { unknown: 'succeeded counts need a key with metrics:read or admin (they come from GET /metrics)' };
    }
    if (error instanceof ApiError && error.status === 404) return { unknown: 'this Sluice has no GET /metrics to count succeeded tasks' };
    throw error;
  }
  return { counts: parseSucceeded(text) };
}

/** The two families `status` needs from the Prometheus text format (0.0.4). */
export function parseSucceeded(text: string): SucceededCounts {
  const byQueue = new Map<string, number>();
  let countedAt: Date | null = null;
  for (const line of text.split('\n')) {
    const sample = /^(sluice_tasks|sluice_tasks_counted_timestamp_seconds)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!sample) continue;
    const [, name, labelText = '', value] = sample;
    if (name === 'sluice_tasks_counted_timestamp_seconds') {
      countedAt = new Date(Number(value) * 1000);
      continue;
    }
    const labels = parseLabels(labelText);
    if (labels.status === 'succeeded' && labels.queue !== undefined) byQueue.set(labels.queue, Number(value));
  }
  return { byQueue, countedAt };
}

function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const [, name, raw] of text.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
    labels[name!] = raw!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
  }
  return labels;
}
