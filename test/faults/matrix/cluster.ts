/**
 * What a fault run runs on: a Postgres (the matrix's own embedded one, which it can restart,
 * or a test database the caller made), a TCP proxy between Sluice and it, and Sluice processes
 * (`node src/node/serve.ts`) started, killed (SIGKILL), stopped and replaced at will.
 */
import type { ChildProcess } from 'node:child_process';
import { readdir, readFile, readlink } from 'node:fs/promises';
import pg from 'pg';
import { freePort } from '../../../src/node/postgres.ts';
import { BIN, spawnReady } from '../../helpers/process.ts';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.ts';

/** Sets `Date` ahead or behind in the process it is preloaded into (the clock faults). */
const SKEWED_CLOCK = new URL('./skewed-clock.ts', import.meta.url).pathname;

export interface SluiceProcess {
  url: string;
  child: ChildProcess;
  /** Local ports of its TCP connections to `port` (from /proc): which pushes are its own. */
  portsTo(port: number): Promise<Set<number>>;
}

export interface Database {
  /** Where the harness connects (directly). */
  url: string;
  /** Restarts Postgres as a crash would (immediate shutdown, then recovery); absent for a test database. */
  restart?: () => Promise<void>;
}

export interface Cluster {
  proxy: TcpProxy;
  /** Sluice's DATABASE_URL: through the proxy. */
  sluiceDatabaseUrl: string;
  /** The harness's own pool, straight to Postgres. */
  admin: pg.Pool;
  processes: SluiceProcess[];
  /** A live process's URL, round robin. */
  anyUrl(): string;
  start(env?: Record<string, string>): Promise<SluiceProcess>;
  kill(p: SluiceProcess): void;
  stopAll(): Promise<void>;
  close(): Promise<void>;
}

/** `direct`: Sluice connects to Postgres itself, not through the proxy (no network faults, no proxy's cost). */
export async function startCluster(db: Database, baseEnv: Record<string, string>, options: { direct?: boolean } = {}): Promise<Cluster> {
  const target = new URL(db.url);
  const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
  const through = new URL(db.url);
  if (!options.direct) through.port = String(proxy.port);
  const admin = new pg.Pool({ connectionString: db.url, max: 4, application_name: 'sluice-faults' });
  admin.on('error', () => {});
  const processes: SluiceProcess[] = [];
  let turn = 0;
  let closed = false;

  const cluster: Cluster = {
    proxy,
    sluiceDatabaseUrl: through.toString(),
    admin,
    processes,
    anyUrl() {
      const live = processes.filter((p) => p.child.exitCode === null && p.child.signalCode === null);
      const p = live[turn++ % Math.max(1, live.length)];
      if (!p) throw new Error('no Sluice process is running');
      return p.url;
    },
    async start(env = {}) {
      if (closed) throw new Error('the run is over');
      const port = await freePort();
      const all = { ...baseEnv, DATABASE_URL: through.toString(), PORT: String(port), ...env };
      const args = env.SLUICE_FAULT_CLOCK_SKEW_MS ? ['--import', SKEWED_CLOCK, 'src/node/serve.ts'] : ['src/node/serve.ts'];
      const child = await spawnReady(`${BIN}/node`, args, all, 'sluice: listening on');
      // Keep reading its output (a full pipe would stall it); errors are expected under faults.
      child.stdout?.resume();
      child.stderr?.resume();
      const p: SluiceProcess = { url: `http://127.0.0.1:${port}`, child, portsTo: (to) => localPortsTo(child.pid!, to) };
      processes.push(p);
      // Started while the run was closing: stop it with the others.
      if (closed) await cluster.stopAll();
      return p;
    },
    kill(p) {
      p.child.kill('SIGKILL');
    },
    async stopAll() {
      await Promise.all(
        processes.splice(0).map(async (p) => {
          if (p.child.exitCode !== null || p.child.signalCode !== null) return;
          const exited = new Promise((r) => p.child.once('exit', r));
          p.child.kill('SIGTERM');
          const timer = setTimeout(() => p.child.kill('SIGKILL'), 10_000);
          await exited;
          clearTimeout(timer);
        }),
      );
    },
    async close() {
      closed = true;
      await cluster.stopAll();
      await admin.end();
      await proxy.close();
    },
  };
  return cluster;
}

/** The local ports of `pid`'s TCP connections to 127.0.0.1:`port`, read from /proc. */
async function localPortsTo(pid: number, port: number): Promise<Set<number>> {
  const inodes = new Set<string>();
  for (const fd of await readdir(`/proc/${pid}/fd`).catch(() => [] as string[])) {
    const link = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
    const m = /^socket:\[(\d+)\]$/.exec(link);
    if (m) inodes.add(m[1]!);
  }
  const ports = new Set<number>();
  const table = await readFile(`/proc/${pid}/net/tcp`, 'utf8').catch(() => '');
  for (const line of table.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10 || !inodes.has(f[9]!)) continue;
    const local = Number.parseInt(f[1]!.split(':')[1]!, 16);
    const remote = Number.parseInt(f[2]!.split(':')[1]!, 16);
    if (remote === port) ports.add(local);
  }
  return ports;
}
