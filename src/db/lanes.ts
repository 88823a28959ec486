/**
 * Lane hints kept by the statements that make tasks pending again (docs/DESIGN.md §5; what a hint
 * is: migrations/0002_limits.sql). A retry, release, admin release or redrive that is due at
 * once lowers its lane's hint in the same statement, so that no claim can miss it, whenever
 * the statement commits. (One due later is promoted by the claim pass that finds it due.)
 * Rows are locked in (queue, lane) order, as by every writer that waits for them (the claim's
 * own, skip-locked, take them in no order), and only where the hint is too poor:
 * a busy lane's hint is already good enough, and is neither written nor locked.
 */

/**
 * A CTE (`, lowered as (…)`) that lowers the hints of the lanes of the rows of `source`, a
 * CTE returning `queue, lane, priority, status, run_at` of tasks just written.
 */
export function lowerHintsCte(source: string): string {
  return `
lowered as (
  update sluice.lanes k
  set head_priority = least(k.head_priority, d.priority)
  from (
    select k2.id, due.priority
    from sluice.lanes k2
    join (
      select queue, lane, min(priority) as priority from ${source}
      where status = 'pending' and run_at <= now()
      group by queue, lane
    ) due on due.queue = k2.queue and due.lane = k2.lane
    where k2.head_priority is null or k2.head_priority > due.priority
    order by k2.queue, k2.lane
    for update of k2
  ) d
  where k.id = d.id
)`;
}
