/**
 * What a drain cost, read around it: statements and their execution time (pg_stat_statements,
 * this database only, harness probes left out), WAL written, Postgres CPU (the postmaster's
 * process tree in /proc) and the CPU of the Node process that ran the contender.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { Cluster, Database } from './cluster.ts';
import { PROBE } from './cluster.ts';

const TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

export interface Cost {
  statements: number;
  execMs: number;
  walBytes: number;
  pgCpuMs: number;
  nodeCpuMs: number;
}

export interface Snapshot {
  statements: number;
  execMs: number;
  lsn: string;
  pgCpuMs: number;
  nodeCpuMs: number;
}

/** Where a contender's Node CPU is read: this process, or a child (Sluice's server). */
export type NodeCpu = { pid: number } | 'self';

export async function snapshot(cluster: Cluster, db: Database, node: NodeCpu): Promise<Snapshot> {
  const [stats] = (
    await cluster.admin.query<{ statements: number; exec_ms: number; lsn: string }>(
      `select coalesce(sum(calls), 0)::float8 as statements, coalesce(sum(total_exec_time), 0)::float8 as exec_ms,
              pg_current_wal_lsn()::text as lsn, 1 as ${PROBE}
       from pg_stat_statements
       where dbid = (select oid from pg_database where datname = $1) and query not like $2`,
      [db.name, `%${PROBE}%`],
    )
  ).rows;
  return {
    statements: stats?.statements ?? 0,
    execMs: stats?.exec_ms ?? 0,
    lsn: stats?.lsn ?? '0/0',
    pgCpuMs: treeCpuMs(cluster.postmasterPid),
    nodeCpuMs: node === 'self' ? selfCpuMs() : processCpuMs(node.pid, false),
  };
}

export async function costBetween(cluster: Cluster, before: Snapshot, after: Snapshot): Promise<Cost> {
  const [wal] = (await cluster.admin.query<{ bytes: number }>('select pg_wal_lsn_diff($1, $2)::float8 as bytes', [after.lsn, before.lsn]))
    .rows;
  return {
    statements: after.statements - before.statements,
    execMs: after.execMs - before.execMs,
    walBytes: wal?.bytes ?? 0,
    pgCpuMs: after.pgCpuMs - before.pgCpuMs,
    nodeCpuMs: after.nodeCpuMs - before.nodeCpuMs,
  };
}

/** The statements that ran most in this database since the last reset: where the calls went. */
export async function topStatements(
  cluster: Cluster,
  db: Database,
  limit = 6,
): Promise<Array<{ query: string; calls: number; meanMs: number }>> {
  const rows = (
    await cluster.admin.query<{ query: string; calls: number; mean_ms: number }>(
      `select left(regexp_replace(query, '\\s+', ' ', 'g'), 160) as query, calls::float8 as calls, mean_exec_time as mean_ms, 1 as ${PROBE}
       from pg_stat_statements
       where dbid = (select oid from pg_database where datname = $1) and query not like $2
       order by calls desc limit $3`,
      [db.name, `%${PROBE}%`, limit],
    )
  ).rows;
  return rows.map((r) => ({ query: r.query, calls: r.calls, meanMs: Math.round(r.mean_ms * 1000) / 1000 }));
}

function selfCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/**
 * The postmaster's own CPU with its reaped children's (cutime, cstime), plus every live child's:
 * a backend that exits between two readings moves its time from the second term to the first.
 */
function treeCpuMs(postmaster: number): number {
  let total = processCpuMs(postmaster, true);
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readStat(Number(entry));
    if (stat && stat.ppid === postmaster) total += processCpuMs(Number(entry), true);
  }
  return total;
}

function processCpuMs(pid: number, withChildren: boolean): number {
  const stat = readStat(pid);
  if (!stat) return 0;
  const ticks = stat.utime + stat.stime + (withChildren ? stat.cutime + stat.cstime : 0);
  return (ticks * 1000) / TICKS_PER_SECOND;
}

function readStat(pid: number): { ppid: number; utime: number; stime: number; cutime: number; cstime: number } | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null; // exited meanwhile
  }
  // Fields after the command name, which may itself hold spaces and parentheses.
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { ppid: Number(f[1]), utime: Number(f[11]), stime: Number(f[12]), cutime: Number(f[13]), cstime: Number(f[14]) };
}
