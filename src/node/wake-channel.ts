/**
 * LISTEN/NOTIFY between self-hosted instances: `announce` tells the others that work came due
 * (coalesced: at most one NOTIFY in flight), and a dedicated connection listens for theirs.
 * A lost listening connection is reopened with backoff, and the reopening counts as a wake-up,
 * since notifications sent meanwhile are gone. At rest (core/rest.ts) it is reopened only once
 * work ends the rest: Neon closes connections as it suspends, and reopening one would wake it.
 */

import pg from 'pg';
import type { RestClock } from '../core/rest.ts';
import { doublingBackoffMs } from '../core/retry.ts';
import type { Poke } from '../core/wake.ts';
import type { Queryable } from '../db/db.ts';
import { LISTEN_WAKE, parseWakeMessage, WAKE_CHANNEL, wakeNotify } from '../db/wake.ts';

export interface WakeChannel {
  announce(poke: Poke): void;
  close(): Promise<void>;
}

/**
 * A listening connection that cannot be made in this time is given up and tried again later: a
 * database that accepts the connection and never answers would otherwise hold it (and `close`) for ever.
 */
const CONNECT_TIMEOUT_MS = 5_000;

export function startWakeChannel(options: {
  databaseUrl: string;
  /** Where NOTIFYs are sent from (the app's pool). */
  db: Queryable;
  /**
   * Called for other instances' pokes; without it nothing is listened for. The server always
   * gives one (an API-only instance too: its waiting pulls need the others' wake-ups), so each
   * instance holds one connection for LISTEN.
   */
  onPoke?: (poke: Poke) => void;
  log?: Pick<Console, 'warn'>;
  /** The process's rest: a connection lost while at rest is reopened when the rest ends. */
  rest?: RestClock;
}): WakeChannel {
  const self = crypto.randomUUID();
  const log = options.log ?? console;
  let closed = false;
  let client: pg.Client | null = null;
  let failures = 0;
  let retry: ReturnType<typeof setTimeout> | null = null;
  /** Set while a lost connection waits for the rest to end. */
  let unwatch: (() => void) | null = null;

  const listen = async (onPoke: (poke: Poke) => void): Promise<void> => {
    if (closed) return;
    // Keep-alive: a half-open connection would otherwise go deaf without an error.
    const c = new pg.Client({ connectionString: options.databaseUrl, keepAlive: true, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    client = c;
    c.on('notification', (n) => {
      if (n.channel !== WAKE_CHANNEL) return;
      const message = parseWakeMessage(n.payload);
      if (message && message.from !== self) {
        onPoke({ atMs: Date.now() + message.inMs, tasks: message.tasks, ...(message.queues ? { queues: message.queues } : {}) });
      }
    });
    c.on('error', () => reopen(c));
    c.on('end', () => reopen(c));
    try {
      await c.connect();
      await c.query(LISTEN_WAKE);
      // Anything announced while we were not listening is lost: look once now.
      if (failures > 0) onPoke({ atMs: Date.now(), tasks: 0 });
      failures = 0;
    } catch (error) {
      log.warn(`sluice: listening for wake-ups failed (${(error as Error).message}); retrying`);
      reopen(c);
    }
  };
  const reopen = (c: pg.Client) => {
    if (closed || client !== c || retry) return;
    client = null;
    c.end().catch(() => {});
    failures++;
    const again = () => {
      unwatch?.();
      unwatch = null;
      if (options.onPoke) void listen(options.onPoke);
    };
    retry = setTimeout(
      () => {
        retry = null;
        if (options.rest?.resting()) unwatch = options.rest.onWake(again);
        else again();
      },
      doublingBackoffMs(failures + 1, 100, 10_000),
    );
  };
  if (options.onPoke) void listen(options.onPoke);

  let pending: Poke | null = null;
  let sending = false;
  const send = async () => {
    sending = true;
    while (pending && !closed) {
      const poke: Poke = pending;
      pending = null;
      // A lost NOTIFY costs at most the other instances' fallback poll.
      await wakeNotify(options.db, self, poke, Date.now()).catch((e) => log.warn(`sluice: NOTIFY failed: ${(e as Error).message}`));
    }
    sending = false;
  };

  return {
    announce(poke) {
      // Merged pokes name queues only while each did: one that names none concerns them all.
      pending = pending ? mergePokes(pending, poke) : poke;
      if (!sending) void send();
    },
    async close() {
      closed = true;
      if (retry) clearTimeout(retry);
      unwatch?.();
      const c = client;
      client = null;
      await c?.end().catch(() => {});
    },
  };
}

function mergePokes(a: Poke, b: Poke): Poke {
  const merged: Poke = { atMs: Math.min(a.atMs, b.atMs), tasks: a.tasks + b.tasks };
  return a.queues && b.queues ? { ...merged, queues: [...new Set([...a.queues, ...b.queues])] } : merged;
}
