/** The matrix's Markdown table: one row per run, the checker's verdict in figures. */
import type { Verdict } from './checker.ts';

export interface ReportRow {
  /** 'Node', 'Worker', or the Worker with its database far away ('Worker, RTT 20 ms'). */
  path: string;
  fault: string;
  title: string;
  verdict: Verdict;
  notes: string[];
  durationMs: number;
  throughput: number;
}

const plural = (n: number, what: string) => `${n.toLocaleString('en')} ${what}${n === 1 ? '' : 's'}`;
const seconds = (ms: number | null) => (ms === null ? '—' : `${(ms / 1_000).toFixed(1)} s`);

function peaks(v: Verdict): string {
  return v.peaks.map((p) => `${p.level.replace(/^queue /, '').replace(/^key /, 'key ')} ${p.peak}/${p.limit}`).join(', ');
}

export function markdownTable(rows: readonly ReportRow[]): string {
  const lines = [
    '| path | fault | tasks | lost | duplicates (explained) | max in flight / limit | leased at rest | stale lease calls accepted | recovery: pushes resumed, rate back to ½ | run | notes |',
    '|---|---|--:|--:|--:|---|--:|--:|---|--:|---|',
  ];
  for (const r of rows) {
    const v = r.verdict;
    const stale = v.staleCalls > 0 ? `${v.staleAccepted} of ${v.staleCalls}` : '0';
    const again = v.recovery.redelivered;
    const redelivered = again
      ? [`${plural(again.tasks, 'disturbed task')} pushed again ${seconds(again.firstMs)}–${seconds(again.lastMs)} after the fault began`]
      : [];
    const notes = [...r.notes, ...redelivered, ...v.problems.map((p) => `**${p}**`)].join('; ');
    lines.push(
      `| ${r.path} | ${r.title} | ${v.tasks.toLocaleString('en')} | ${v.lost} | ${v.duplicates} (${v.explained}) | ${peaks(v)} | ${v.leasedAtRest} | ${stale} | ${seconds(v.recovery.resumedMs)}, ${seconds(v.recovery.rateBackMs)} | ${seconds(r.durationMs)}, ${Math.round(r.throughput)}/s | ${notes || '—'} |`,
    );
  }
  return lines.join('\n');
}
