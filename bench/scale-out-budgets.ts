/**
 * `npx node bench/scale-out-budgets.ts`: a deterministic simulation of the cluster cap split into
 * per-database budgets by a coordinator (docs/scale-out.md, "The cluster cap as budgets"). No
 * database: four simulated ones, each enforcing its own budget as its claim enforces
 * SLUICE_CLUSTER_CAP today, and a coordinator that moves budget between them by demand.
 *
 * Time moves in ticks of 100 ms for 120 s. Each database receives tasks at a rate that changes
 * every 30 s; a leased task runs an exponential time (mean 2 s, at most the 10 s lease, drawn
 * from a seeded generator), then frees its slot. Every tick each database leases what its budget
 * allows. Every second the coordinator reads each database it can reach (leased, pending, the
 * budget it runs under), computes targets by demand (water-filling, a floor of 10 each), and:
 *
 *   safe  — grows a budget only out of unreserved cap; shrinks by writing the lower budget and
 *           keeping the old one reserved until a later read shows the database's leased count at
 *           or under the new value; renews budget leases (5 s); reclaims a database it cannot
 *           reach only after its budget lease plus the longest task lease (10 s) have run out.
 *   naive — writes the targets and counts the new values at once, as if a lower budget took
 *           effect on leases already granted.
 *
 * From 70 s to 95 s database 3 is cut off from the coordinator (it keeps running). Prints, per
 * protocol, the most leased at once across the databases (the cap is 1,000), the ticks over it,
 * and how much of what could run did run, per phase.
 */

const CAP = 1_000;
const DATABASES = 4;
const TICK_MS = 100;
const TICKS = 1_200;
const ROUND_TICKS = 10;
const FLOOR = 10;
const BUDGET_LEASE_TICKS = 50;
const TASK_LEASE_TICKS = 100;
const MEAN_RUN_TICKS = 20;
const PARTITION = { db: 3, from: 700, to: 950 };
/** Arrivals, tasks/s per database, in four 30-second phases. */
const PHASES: readonly (readonly number[])[] = [
  [400, 50, 50, 50],
  [50, 50, 400, 50],
  [150, 150, 150, 150],
  [50, 450, 50, 450],
];

/** mulberry32: the same numbers on every run. */
function generator(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Shares `cap` by demand: everyone gets up to an equal share, what is left goes to those who want more. */
function waterFill(demand: readonly number[], cap: number, floor: number): number[] {
  const want = demand.map((d) => Math.max(d, floor));
  const out = new Array<number>(want.length).fill(0);
  let left = cap;
  let open = want.map((_, i) => i);
  while (open.length > 0 && left > 0) {
    const share = Math.floor(left / open.length);
    if (share === 0) break;
    const next: number[] = [];
    for (const i of open) {
      const give = Math.min(share, want[i]! - out[i]!);
      out[i]! += give;
      left -= give;
      if (out[i]! < want[i]!) next.push(i);
    }
    open = next;
  }
  return out;
}

interface Db {
  pending: number;
  /** Ticks left for each leased task. */
  leases: number[];
  /** The budget its claims run under, and the tick its lease of it runs out. */
  budget: number;
  budgetUntil: number;
  arrivals: number;
}

function simulate(protocol: 'safe' | 'naive') {
  const random = generator(19);
  const dbs: Db[] = Array.from({ length: DATABASES }, () => ({
    pending: 0,
    leases: [],
    budget: CAP / DATABASES,
    budgetUntil: BUDGET_LEASE_TICKS,
    arrivals: 0,
  }));
  /**
   * What the coordinator counts as given to each database: never less than its budget, and above
   * it while a shrink is not yet seen through.
   */
  const reserved = dbs.map((d) => d.budget);
  /** Budgets taken back from a database out of reach: it must be written down to 0 before it runs again. */
  const reclaimed = new Array<boolean>(DATABASES).fill(false);
  let peak = 0;
  let over = 0;
  let moves = 0;
  const phases = PHASES.map(() => ({ ran: 0, couldRun: 0, ticks: 0 }));
  for (let tick = 0; tick < TICKS; tick++) {
    const phase = Math.min(PHASES.length - 1, Math.floor(tick / (TICKS / PHASES.length)));
    // The databases: arrivals, tasks ending, claims under the budget (none once its lease ran out).
    for (const [i, db] of dbs.entries()) {
      db.arrivals += (PHASES[phase]![i]! * TICK_MS) / 1000;
      const arrived = Math.floor(db.arrivals);
      db.arrivals -= arrived;
      db.pending += arrived;
      db.leases = db.leases.map((t) => t - 1).filter((t) => t > 0);
      const budget = tick < db.budgetUntil ? db.budget : 0;
      const take = Math.max(0, Math.min(db.pending, budget - db.leases.length));
      for (let k = 0; k < take; k++) {
        const run = Math.ceil(-Math.log(1 - random()) * MEAN_RUN_TICKS);
        db.leases.push(Math.min(run, TASK_LEASE_TICKS));
      }
      db.pending -= take;
    }
    if (protocol === 'safe' && dbs.some((db, i) => db.leases.length > reserved[i]!))
      throw new Error(`tick ${tick}: leases above a reservation`);
    const leased = dbs.reduce((n, db) => n + db.leases.length, 0);
    const demand = dbs.reduce((n, db) => n + db.leases.length + db.pending, 0);
    peak = Math.max(peak, leased);
    if (leased > CAP) over++;
    phases[phase]!.ran += leased;
    phases[phase]!.couldRun += Math.min(CAP, demand);
    phases[phase]!.ticks++;

    if (tick % ROUND_TICKS !== 0) continue;
    // The coordinator's round.
    const reachable = dbs.map((_, i) => !(i === PARTITION.db && tick >= PARTITION.from && tick < PARTITION.to));
    for (const [i, db] of dbs.entries()) {
      if (!reachable[i]) continue;
      if (reclaimed[i]) {
        // Back in reach: its old budget was given away; it starts again from nothing.
        db.budget = 0;
        reclaimed[i] = false;
      }
      // A shrink is through once the database, under its lower budget, leases no more than it.
      if (reserved[i]! > db.budget && db.leases.length <= db.budget) reserved[i] = db.budget;
    }
    for (const [i, db] of dbs.entries()) {
      // Out of reach: once its budget lease and every task lease it could have granted have run
      // out, it holds nothing, whatever it does.
      if (!reachable[i] && !reclaimed[i] && tick >= db.budgetUntil + TASK_LEASE_TICKS) {
        reserved[i] = 0;
        reclaimed[i] = true;
      }
    }
    const targets = waterFill(
      dbs.map((db, i) => (reachable[i] ? db.leases.length + db.pending : reserved[i]!)),
      CAP,
      FLOOR,
    );
    // Shrinks first (so that their slots can be freed by a later round), then growth from what is free.
    for (const [i, db] of dbs.entries()) {
      if (!reachable[i]) continue;
      const target = targets[i]!;
      if (target < db.budget) {
        db.budget = target;
        moves++;
        // Safe: the old value stays reserved until a later round sees the leases under the new one.
        if (protocol === 'naive') reserved[i] = target;
      }
    }
    for (const [i, db] of dbs.entries()) {
      if (!reachable[i]) continue;
      const target = targets[i]!;
      if (target > db.budget) {
        // Its own reservation first (a shrink not yet through), then what nobody holds; reserved
        // before it is written, so the cap is counted before any database can use it.
        const free = CAP - reserved.reduce((a, b) => a + b, 0);
        const budget = protocol === 'naive' ? target : Math.min(target, reserved[i]! + free);
        if (budget > db.budget) {
          reserved[i] = protocol === 'naive' ? budget : Math.max(reserved[i]!, budget);
          db.budget = budget;
          moves++;
        }
      }
      db.budgetUntil = tick + BUDGET_LEASE_TICKS;
    }
    if (protocol === 'safe' && reserved.reduce((a, b) => a + b, 0) > CAP) throw new Error(`tick ${tick}: reserved above the cap`);
  }
  return { peak, over, moves, phases };
}

const fmt = (x: number, digits = 0) => x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
console.log(
  `Cap ${fmt(CAP)} over ${DATABASES} databases; ${(TICKS * TICK_MS) / 1000} s in ${TICK_MS} ms ticks; coordinator every ${(ROUND_TICKS * TICK_MS) / 1000} s.`,
);
console.log(
  `Arrivals (tasks/s per database) by 30 s phase: ${PHASES.map((p) => p.join('/')).join(', ')}; database ${PARTITION.db} cut off ${(PARTITION.from * TICK_MS) / 1000}–${(PARTITION.to * TICK_MS) / 1000} s.\n`,
);
console.log('| protocol | most leased at once | ticks over the cap | budget writes | ran ÷ could run, phases 1 / 2 / 3 / 4 |');
console.log('|---|--:|--:|--:|---|');
for (const protocol of ['safe', 'naive'] as const) {
  const r = simulate(protocol);
  const share = r.phases.map((p) => `${fmt((100 * p.ran) / p.couldRun)}%`).join(' / ');
  console.log(`| ${protocol} | ${fmt(r.peak)} | ${fmt(r.over)} | ${fmt(r.moves)} | ${share} |`);
}
