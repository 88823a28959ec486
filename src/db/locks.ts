/**
 * Every advisory lock Sluice takes, by id (docs/DESIGN.md §1). All are transaction-scoped. The
 * SQL function files take theirs by the literal id and cite this module; test/unit/locks.test.ts
 * holds every id written anywhere to this list.
 */
export const ADVISORY_LOCKS = Object.freeze({
  /** The migration runner (src/db/migrate.ts): one run at a time. */
  migrations: 7_215_530_001,
  /** The claim and a wait's decision, through `sluice.claim_lock()` (migrations/functions/claim.sql). */
  claim: 7_215_530_002,
  /** The task count refresh (src/db/metrics.ts); a try-lock: a second one does nothing. */
  counts: 7_215_530_003,
  /** The history sweep (migrations/functions/history.sql); a try-lock: a second sweeper does nothing. */
  historySweep: 7_215_530_004,
});
