/**
 * bench/ceiling.ts's measured windows: loops of a step run for a warm-up and then a fixed time,
 * counting what they did, and the cores other processes used meanwhile (Linux /proc), so that a
 * cell measured on a busy machine can be marked and measured again.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

/**
 * CPU time on the whole machine, and that of this process, the Postgres it started and that
 * server's backends (Linux /proc, in clock ticks of 10 ms): what is left is someone else's.
 */
function ticksOf(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}
export function cpuSnapshot(postmasterPid: number): { busy: number; ours: Map<number, number> } {
  const [, ...fields] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/);
  const n = fields.map(Number);
  const busy = n.reduce((a, b) => a + b, 0) - n[3]! - n[4]!;
  const ours = new Map<number, number>([[process.pid, ticksOf(process.pid)]]);
  if (postmasterPid > 0) {
    ours.set(postmasterPid, ticksOf(postmasterPid));
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]!.split(' ');
        if (Number(stat[1]) === postmasterPid) ours.set(Number(entry), ticksOf(Number(entry)));
      } catch {}
    }
  }
  return { busy, ours };
}
/** Cores used by other processes between two snapshots `ms` apart (a backend of ours that ended meanwhile counts as theirs). */
function otherCores(a: ReturnType<typeof cpuSnapshot>, b: ReturnType<typeof cpuSnapshot>, ms: number): number {
  let ours = 0;
  // A process of ours born during the window spent all its time in it.
  for (const [pid, ticks] of b.ours) ours += ticks - (a.ours.get(pid) ?? 0);
  return Math.max(0, (b.busy - a.busy - ours) / 100 / (ms / 1000));
}

/** What a measured window saw. */
export interface Window {
  /** True while the window is open: work that began and ended inside it counts. */
  open: boolean;
  ops: number;
  items: number;
  ms: number;
  /** Mean time of one step, ms. */
  latencyMs: number;
  /** A step found nothing left to do (which ends every loop). */
  drained: boolean;
  /** Cores other processes used meanwhile (the machine is shared). */
  otherCores: number;
}

/** How long a window warms up and then measures, and whose CPU is ours besides this process's. */
export interface WindowTiming {
  warmMs: number;
  measureMs: number;
  /** The Postgres server this run started (its backends are ours); 0 until it runs. */
  postmasterPid: () => number;
}

/**
 * Runs `workers` loops of `step` for the warm-up and then the measured time; a step says how many
 * items it did, or null when there is nothing left. `onOpen` runs as the window opens.
 */
export async function measureWindow(
  timing: WindowTiming,
  workers: number,
  step: (worker: number, window: Window) => Promise<number | null>,
  onOpen?: () => Promise<void>,
): Promise<Window> {
  const { warmMs: WARM_MS, measureMs: MEASURE_MS } = timing;
  const snapshot = () => cpuSnapshot(timing.postmasterPid());
  const window: Window = { open: false, ops: 0, items: 0, ms: 0, latencyMs: 0, drained: false, otherCores: 0 };
  let stopped = false;
  let start = 0;
  let cpuAtOpen = snapshot();
  let opening: Promise<void> = Promise.resolve();
  const stop = () => {
    if (stopped) return;
    if (window.open) {
      window.ms = performance.now() - start;
      window.otherCores = otherCores(cpuAtOpen, snapshot(), window.ms);
    }
    window.open = false;
    stopped = true;
  };
  const warm = setTimeout(() => {
    opening = onOpen?.() ?? Promise.resolve();
    cpuAtOpen = snapshot();
    window.open = true;
    start = performance.now();
  }, WARM_MS);
  const done = setTimeout(stop, WARM_MS + MEASURE_MS);
  let latency = 0;
  const loop = async (worker: number) => {
    while (!stopped) {
      const began = performance.now();
      const counted = window.open;
      const n = await step(worker, window);
      if (n === null) {
        window.drained = true;
        stop();
        break;
      }
      if (counted && window.open) {
        window.ops++;
        window.items += n;
        latency += performance.now() - began;
      }
    }
  };
  await Promise.all(Array.from({ length: workers }, (_, i) => loop(i)));
  await opening;
  clearTimeout(warm);
  clearTimeout(done);
  if (start === 0) throw new Error('the work ran out during the warm-up: enqueue more');
  window.latencyMs = window.ops > 0 ? latency / window.ops : 0;
  return window;
}
