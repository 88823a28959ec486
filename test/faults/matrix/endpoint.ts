/**
 * The fault matrix's endpoint: a real HTTP server that receives Sluice's pushes, works on each
 * as the run's script says (answer, hang past the timeout, keep the lease and heartbeat, vanish,
 * or send duplicate, concurrent and late lease calls), and logs every push and lease call for
 * the checker. A handler runs its course whatever happens to the connection, as a real one does.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Behaviour, LeaseCallRecord, PushRecord } from './checker.ts';

/** A request's body, or `null` when its sender went away before it all arrived (an `aborted` request). */
export async function readBody(req: IncomingMessage): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of req) chunks.push(chunk as Buffer);
  } catch {
    return null;
  }
  return Buffer.concat(chunks);
}

/** Wall-clock time with sub-millisecond precision. */
export const wallNow = (): number => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface FaultEndpoint {
  url: string;
  port: number;
  pushes: PushRecord[];
  calls: LeaseCallRecord[];
  /** Lease ids the endpoint has seen. */
  seenLeases: Set<string>;
  /** Remote ports of the pushes whose handler was working on the answer at `at` (or still is). */
  portsOpenAt(at: number): Set<number>;
  /** Pushes finished by the endpoint (`done`), for progress. */
  doneCount(): number;
  /** Sets how pushes are handled from now on. */
  behave(script: (push: PushRecord) => Behaviour): void;
  /** Clears the logs (between runs). */
  reset(): void;
  /** Resolves when no lease call is under way (late calls included). */
  settled(): Promise<void>;
  close(): Promise<void>;
}

export async function startFaultEndpoint(options: {
  /** A Sluice base URL that is up now, for lease calls (processes come and go in a run). */
  sluiceUrl: () => string;
}): Promise<FaultEndpoint> {
  const pushes: PushRecord[] = [];
  const calls: LeaseCallRecord[] = [];
  const seenLeases = new Set<string>();
  const ports = new Map<PushRecord, number>();
  const background = new Set<Promise<void>>();
  let done = 0;
  let script: (push: PushRecord) => Behaviour = () => ({ kind: 'ok', ms: 20 });

  const track = (work: Promise<void>) => {
    background.add(work);
    void work.finally(() => background.delete(work));
  };

  /** One lease call, tried on another process when one is down, until the lease is surely over. */
  async function leaseCall(rec: PushRecord, token: string, call: LeaseCallRecord['call'], stale: boolean, body: object = {}) {
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await fetch(`${options.sluiceUrl()}/v1/leases/${rec.leaseId}/${call}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(5_000),
        });
        const answer = (await res.json().catch(() => ({}))) as { expires_at?: string; repeated?: boolean };
        // A 503 (the database does not answer) decides nothing: ask again, while it can matter.
        if (res.status === 503 && !stale && wallNow() < rec.leaseUntil && attempt < 20) {
          await sleep(200);
          continue;
        }
        calls.push({ leaseId: rec.leaseId, taskId: rec.taskId, call, stale, status: res.status, repeated: answer.repeated === true });
        return { status: res.status, answer };
      } catch {
        if (stale || wallNow() >= rec.leaseUntil || attempt >= 20) return { status: 0, answer: {} };
        await sleep(200);
      }
    }
  }

  async function keepLease(rec: PushRecord, token: string, ms: number, heartbeatMs: number): Promise<void> {
    const until = rec.receivedAt + ms;
    while (wallNow() < until) {
      await sleep(Math.min(heartbeatMs, Math.max(0, until - wallNow())));
      if (wallNow() >= until) break;
      const { status, answer } = await leaseCall(rec, token, 'heartbeat', false, {});
      if (status === 200 && answer.expires_at) rec.leaseUntil = Date.parse(answer.expires_at);
      else if (status === 409 || wallNow() >= rec.leaseUntil) {
        // The lease is gone: the work stops, unfinished.
        rec.endedAt = wallNow();
        return;
      }
    }
    rec.endedAt = wallNow();
    const { status } = await leaseCall(rec, token, 'complete', false, { result: 'ok' });
    if (status === 200) {
      rec.done = true;
      done++;
      rec.leaseUntil = Math.min(rec.leaseUntil, rec.endedAt);
    }
  }

  async function chaos(rec: PushRecord, token: string, ms: number): Promise<void> {
    await Promise.all([leaseCall(rec, token, 'heartbeat', false), leaseCall(rec, token, 'heartbeat', false)]);
    await sleep(ms);
    rec.endedAt = wallNow();
    const answers = await Promise.all([
      leaseCall(rec, token, 'complete', false, { result: 'a' }),
      leaseCall(rec, token, 'complete', false, { result: 'b' }),
    ]);
    if (answers.some((a) => a.status === 200)) {
      rec.done = true;
      done++;
      rec.leaseUntil = Math.min(rec.leaseUntil, rec.endedAt);
    }
    // Late: the lease has ended; these must change nothing.
    await sleep(50);
    await Promise.all([
      leaseCall(rec, token, 'heartbeat', true),
      leaseCall(rec, token, 'complete', true, { result: 'late' }),
      leaseCall(rec, token, 'fail', true, { error: 'late' }),
    ]);
  }

  async function abandon(rec: PushRecord, token: string): Promise<void> {
    rec.endedAt = rec.receivedAt;
    // Back after the lease expired, as a paused holder would be.
    await sleep(Math.max(0, rec.leaseUntil - wallNow()) + 300);
    await Promise.all([leaseCall(rec, token, 'heartbeat', true), leaseCall(rec, token, 'complete', true, { result: 'late' })]);
  }

  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const receivedAt = wallNow();
    const raw = await readBody(req);
    // The sender went away (killed) before its body arrived: no push arrived.
    if (raw === null) return;
    const h = req.headers;
    const body = JSON.parse(raw.toString('utf8') || '{}') as { item?: number };
    const rec: PushRecord = {
      taskId: String(h['sluice-task-id']),
      webhookId: h['webhook-id'] === undefined ? null : String(h['webhook-id']),
      item: body.item ?? -1,
      queue: String(h['sluice-queue']),
      key: decodeURIComponent(String(h['sluice-concurrency-key'] ?? '')),
      attempt: Number(h['sluice-attempt']),
      leaseId: String(h['sluice-lease-id']),
      behaviour: 'ok',
      receivedAt,
      endedAt: null,
      leaseUntil: Date.parse(String(h['sluice-lease-expires-at'])),
      done: false,
    };
    const token = String(h['sluice-lease-token']);
    pushes.push(rec);
    seenLeases.add(rec.leaseId);
    const how = script(rec);
    rec.behaviour = how.kind;
    ports.set(rec, req.socket.remotePort ?? 0);
    if (how.kind === 'ok' || how.kind === 'hang' || how.kind === 'fail') {
      await sleep(how.ms);
      rec.endedAt = wallNow();
      if (res.destroyed) return;
      res.writeHead(how.kind === 'fail' ? 500 : 200).end(how.kind);
      // Too late for a hang: Sluice gave up on the answer (its lease holds the slot meanwhile).
      if (how.kind === 'ok') {
        rec.done = true;
        done++;
      }
      return;
    }
    res.writeHead(202, { 'sluice-ack': 'lease' }).end();
    if (how.kind === 'lease') track(keepLease(rec, token, how.ms, how.heartbeatMs));
    else if (how.kind === 'chaos') track(chaos(rec, token, how.ms));
    else track(abandon(rec, token));
  });
  server.keepAliveTimeout = 1_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    pushes,
    calls,
    seenLeases,
    portsOpenAt(at) {
      const open = new Set<number>();
      for (const [rec, port] of ports) if (rec.receivedAt <= at && (rec.endedAt === null || rec.endedAt >= at)) open.add(port);
      return open;
    },
    doneCount: () => done,
    behave(next) {
      script = next;
    },
    reset() {
      pushes.length = 0;
      calls.length = 0;
      seenLeases.clear();
      ports.clear();
      done = 0;
      script = () => ({ kind: 'ok', ms: 20 });
    },
    async settled() {
      while (background.size > 0) await Promise.allSettled([...background]);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
