/**
 * Preloaded (`node --import`) into a Sluice process for the clock faults: its wall clock reads
 * `SLUICE_FAULT_CLOCK_SKEW_MS` ahead of the machine's (behind when negative), as a host whose
 * clock drifted would, while its timers, which run on the monotonic clock, stay true. Postgres
 * keeps the machine's clock, so the process and the database disagree by exactly that much.
 */
const skewMs = Number(process.env.SLUICE_FAULT_CLOCK_SKEW_MS ?? 0);
const TrueDate = Date;
const trueNow = Date.now.bind(Date);

class SkewedDate extends TrueDate {
  constructor(...args: unknown[]) {
    if (args.length === 0) super(trueNow() + skewMs);
    else super(...(args as [string]));
  }
  static override now(): number {
    return trueNow() + skewMs;
  }
}

globalThis.Date = SkewedDate as DateConstructor;
