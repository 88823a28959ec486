/** How long history keeps a finished task (docs/DESIGN.md §10), for the sweep that drops it and the API that promises it. */

/** How long finished tasks are kept: the window, never less than a lease can last (a late repeated `complete` still gets its answer); `null`: for ever. */
export function keepMs(config: { retentionMs: number | null; maxLeaseMs: number }): number | null {
  return config.retentionMs === null ? null : Math.max(config.retentionMs, config.maxLeaseMs);
}
