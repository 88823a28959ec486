/**
 * Where a Worker's round trips to Postgres go, from the Neon stand-in's trace (src/node/ws-proxy.ts):
 * on a WebSocket, its upgrade, the startup and each authentication message, each simple query,
 * and each Sync of the extended protocol (a statement: Parse/Bind/Execute, then Sync, waited
 * for) is one round trip; on /sql, each request is. Each is named by its statement's text.
 */
import type { ProxyTrace } from '../src/node/ws-proxy.ts';

export type Attribution = Record<string, { roundTrips: number; where: string; texts?: Record<string, number> }>;

/** Statement kinds, first match wins, with where in the code they are sent from. */
const KINDS: Array<{ kind: string; test: RegExp; where: string }> = [
  { kind: 'claim', test: /sluice\.claim\(/, where: 'dispatcher/run.ts claim → db/claim.ts taskClaimBatch' },
  { kind: 'settle', test: /insert into sluice\.attempts/, where: 'dispatcher/settler.ts Settler → db/settle.ts leaseSettleReport' },
  {
    kind: 'next-due probe',
    test: /extract\(epoch from least/,
    where: 'dispatcher/run.ts linger (or its end) and due-watch.ts → db/due.ts nextDueInMs',
  },
  {
    kind: 'reap',
    test: /lease_expires_at <= now\(\)\s+order by lease_expires_at/,
    where: 'dispatcher/run.ts reapThenFire → db/reap.ts reapOverdue',
  },
  { kind: 'schedules due', test: /sluice\.schedules/, where: 'dispatcher/fire-schedules.ts → db/schedules.ts schedulesDue' },
  { kind: 'meter write', test: /sluice\.counters/, where: 'dispatcher/run.ts (run end) → dispatcher/meter.ts → db/metrics.ts' },
  {
    kind: 'task counts',
    test: /task_counts|7215530003/,
    where: 'Worker: index.ts scheduled (the cron); Node: node/server.ts, every 15 s → db/metrics.ts taskCountsRefresh',
  },
  {
    kind: 'retention sweep',
    test: /rate_grants|rate_buckets|lanes_sweep|history_sweep|stragglers|delete from sluice\.levels|sluice\.debounces d|with picked as/,
    where: 'Worker: the cron and worker/pusher.ts (shard 0); Node: node/server.ts timer → dispatcher/retention.ts sweepFinished',
  },
  { kind: 'enqueue (API)', test: /insert into sluice\.tasks|sluice\.enqueue|from sluice\.all_tasks/, where: 'api → db/enqueue.ts' },
  { kind: 'wake NOTIFY', test: /pg_notify/, where: 'node/wake-channel.ts announce → db/wake.ts (Node: every poke)' },
  { kind: 'begin / commit', test: /^\s*(begin|commit|rollback)\b/i, where: 'db/db.ts poolDb transaction' },
];

function kindOf(text: string): string {
  return KINDS.find((k) => k.test.test(text))?.kind ?? 'other';
}

const WHERE: Record<string, string> = {
  ...Object.fromEntries(KINDS.map((k) => [k.kind, k.where])),
  'connect: WebSocket upgrade': 'db/neon.ts openNeonDb: a Pool of 2 per shard drain (kept 10 s after), per cron run, per API transaction',
  'connect: startup + auth': 'each new connection: startup, then the password (embedded Postgres: --auth=password)',
  other: 'see the statements below',
};

/** `stream`: what the byte stream is called (`WebSocket` at the stand-in, `TCP` at the Node server's relay). */
export function attribute(events: readonly ProxyTrace[], stream = 'WebSocket'): Attribution {
  const out: Attribution = {};
  const add = (kind: string, via: 'ws' | 'sql', text?: string) => {
    const name = kind.startsWith('connect') ? kind : `${kind} (${via === 'sql' ? 'HTTP /sql' : stream})`;
    out[name] ??= { roundTrips: 0, where: WHERE[kind] ?? '' };
    const entry = out[name];
    entry.roundTrips++;
    if (kind === 'other' && text !== undefined) {
      const short = text.replace(/\s+/g, ' ').slice(0, 80);
      entry.texts ??= {};
      entry.texts[short] = (entry.texts[short] ?? 0) + 1;
    }
  };
  /** The statement a connection's next Sync finishes. */
  const pending = new Map<number, string>();
  for (const e of events) {
    if (e.transport === 'sql') {
      const text = e.texts.join('; ');
      add(kindOf(text), 'sql', text);
      continue;
    }
    if (e.event === 'open') add('connect: WebSocket upgrade', 'ws');
    if (e.event !== 'message') continue;
    if (e.type === 'startup' || e.type === 'ssl' || e.type === 'p') add('connect: startup + auth', 'ws');
    else if (e.type === 'Q') add(kindOf(e.text ?? ''), 'ws', e.text);
    else if ((e.type === 'P' || e.type === 'B') && e.text !== undefined) pending.set(e.conn, e.text);
    else if (e.type === 'S') {
      const text = pending.get(e.conn) ?? '';
      pending.delete(e.conn);
      add(kindOf(text), 'ws', text);
    }
  }
  return out;
}
