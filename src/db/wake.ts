/**
 * Wake-ups between self-hosted instances (docs/DESIGN.md §6): an instance whose API made work due
 * tells the others with NOTIFY; each LISTENs on its own connection. The payload is a `Poke`
 * and the sender's id, so an instance skips its own.
 */
import type { Poke } from '../core/wake.ts';
import type { Queryable } from './db.ts';

export const WAKE_CHANNEL = 'sluice_wake';
export const LISTEN_WAKE = `listen ${WAKE_CHANNEL}`;

/** A poke as sent: due `inMs` from sending (relative, so instances' clocks need not agree). */
export interface WakeMessage {
  from: string;
  inMs: number;
  tasks: number;
  /** The poke's queues, when it names them (waiting pulls of other queues stay asleep). */
  queues?: string[];
}

export async function wakeNotify(db: Queryable, from: string, poke: Poke, nowMs: number): Promise<void> {
  const message: WakeMessage = {
    from,
    inMs: Math.max(0, poke.atMs - nowMs),
    tasks: poke.tasks,
    ...(poke.queues ? { queues: [...poke.queues] } : {}),
  };
  await db.query('select pg_notify($1, $2)', [WAKE_CHANNEL, JSON.stringify(message)]);
}

/** A notification's payload, or `null` when it is not one of ours. */
export function parseWakeMessage(payload: string | undefined): WakeMessage | null {
  try {
    const m = JSON.parse(payload ?? '') as Partial<WakeMessage>;
    const queues = m.queues === undefined || (Array.isArray(m.queues) && m.queues.every((q) => typeof q === 'string'));
    if (typeof m.from === 'string' && typeof m.inMs === 'number' && typeof m.tasks === 'number' && queues) return m as WakeMessage;
  } catch {
    // Not ours: ignored.
  }
  return null;
}
