/**
 * `npm run test:faults`: the full fault matrix. One fault per run, each on a fresh task table
 * with two Sluice processes (the Node path) or the Worker in workerd (the Worker path), then the
 * total-queue check. Writes a Markdown table to test/faults/results/ and prints it; exits 1 when
 * any run fails its check.
 *
 *   npm run test:faults -- --tasks 10000 --only kill-mid-push,postgres-restart --worker-tasks 3000
 *   --tasks N          items per Node run (default 10,000; 0 skips the Node path)
 *   --worker-tasks N   items per Worker run (default 3,000; 0 skips the Worker path)
 *   --only a,b         only these faults (names as in the table's first column of the log)
 *   --repeat N         each chosen fault N times in a row (default 1): a fault that fails now and then
 *   --rtt N            the Worker path's database N ms away (the stand-in's delay, both ways; default 0)
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { parseRttMs } from '../../../src/node/tcp-delay.ts';
import { startFaultEndpoint } from './endpoint.ts';
import { FAULTS } from './faults.ts';
import { markdownTable, type ReportRow } from './report.ts';
import { runFault } from './scenario.ts';
import { runSecrets, startMatrixPostgres } from './setup.ts';
import { runWorkerFault, WORKER_FAULTS } from './worker.ts';

const { values } = parseArgs({
  options: {
    tasks: { type: 'string', default: '10000' },
    'worker-tasks': { type: 'string', default: '3000' },
    only: { type: 'string' },
    repeat: { type: 'string', default: '1' },
    rtt: { type: 'string', default: '0' },
  },
});
const tasks = Number(values.tasks);
const workerTasks = Number(values['worker-tasks']);
const only = values.only ? new Set(values.only.split(',')) : null;
const repeat = Number(values.repeat);
const rttMs = parseRttMs('--rtt', values.rtt);
const workerPath = rttMs > 0 ? `Worker, RTT ${rttMs} ms` : 'Worker';
const chosen = <T extends { name: string }>(all: T[]) =>
  all.filter((f) => !only || only.has(f.name)).flatMap((f) => Array.from({ length: repeat }, () => f));
const log = (line: string) => console.log(line);
// Postgres's FATALs are what the faults make it say (terminated, shut down): kept, not printed.
const postgresLog: string[] = [];
const printError = console.error;
console.error = (...args: unknown[]) => {
  if (typeof args[0] === 'string' && args[0].startsWith('[postgres]')) postgresLog.push(args.join(' '));
  else printError(...args);
};

const postgres = await startMatrixPostgres();
const { env, apiKey } = await runSecrets(postgres.db.url);
let sluiceUrl = () => '';
const endpoint = await startFaultEndpoint({ sluiceUrl: () => sluiceUrl() });
const rows: ReportRow[] = [];
const started = Date.now();
try {
  for (const fault of tasks > 0 ? chosen(FAULTS) : []) {
    log(`Node: ${fault.name}: ${fault.title}, ${tasks} items`);
    const result = await runFault(fault, { db: postgres.db, endpoint, env, apiKey, log, setSluiceUrl: (f) => (sluiceUrl = f) }, tasks);
    rows.push({ ...result, path: 'Node', fault: fault.name, title: fault.title });
    log(`  ${result.verdict.ok ? 'ok' : `FAILED: ${result.verdict.problems.join('; ')}`} (${(result.durationMs / 1000).toFixed(1)} s)`);
  }
  if (workerTasks > 0) {
    for (const fault of chosen(WORKER_FAULTS)) {
      log(`${workerPath}: ${fault.name}: ${fault.title}, ${workerTasks} items`);
      const result = await runWorkerFault(
        fault,
        { db: postgres.db, pgPort: postgres.port, endpoint, env, apiKey, log, setSluiceUrl: (f) => (sluiceUrl = f), rttMs },
        workerTasks,
      );
      rows.push({ ...result, path: workerPath, fault: fault.name, title: fault.title });
      log(`  ${result.verdict.ok ? 'ok' : `FAILED: ${result.verdict.problems.join('; ')}`} (${(result.durationMs / 1000).toFixed(1)} s)`);
    }
  }
} finally {
  await endpoint.close();
  await postgres.close();
}

const table = markdownTable(rows);
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const dir = new URL('../results/', import.meta.url);
await mkdir(dir, { recursive: true });
const file = new URL(`matrix-${stamp}.md`, dir);
const header = `# Sluice fault matrix, ${new Date().toISOString()}\n\n${rows.length} runs, ${((Date.now() - started) / 60_000).toFixed(1)} minutes in all.\n\n`;
await writeFile(file, `${header}${table}\n`);
await writeFile(new URL(`postgres-${stamp}.log`, dir), `${postgresLog.join('\n')}\n`);
console.log(`\n${table}\n\nwritten to ${file.pathname}`);
process.exit(rows.every((r) => r.verdict.ok) ? 0 : 1);
