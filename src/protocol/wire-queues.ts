/**
 * The API's wire format (snake_case) for queues (their settings, limits and levels), schedules,
 * endpoint groups and endpoints: TypeScript types for SDK users, held equal to the API's schemas
 * by test/unit/wire.test.ts, as those of wire.ts.
 */
import type { HttpMethod, Rate, Source } from './wire.ts';

export interface QueueSettingsPatch {
  concurrency?: number | null;
  key_concurrency?: number | null;
  priority?: number | null;
  paused?: boolean | null;
  rate?: Rate | null;
  key_rate?: Rate | null;
  adaptive?: boolean | null;
  adaptive_min?: number | null;
  pull?: boolean | null;
  key_strategy?: KeyStrategy | null;
}

/**
 * What an enqueue does to a concurrency key with unfinished tasks: `queue` (default) waits
 * behind them; `cancel_in_progress` cancels them, a leased one at once; `cancel_newest` makes
 * nothing and answers the unfinished task (`skipped`); `replace_pending` cancels the pending ones.
 */
export type KeyStrategy = 'queue' | 'cancel_in_progress' | 'cancel_newest' | 'replace_pending';

export interface Sourced<T> {
  value: T;
  source: Source;
}

export interface QueueView {
  name: string;
  concurrency: Sourced<number | null>;
  key_concurrency: Sourced<number | null>;
  priority: Sourced<number>;
  paused: Sourced<boolean>;
  /** At most `limit` pushes per `period_ms`: of the queue, and of each key by default. */
  rate: Sourced<Rate | null>;
  key_rate: Sourced<Rate | null>;
  /** Limits that learn from the endpoint (AIMD): the configured ones are ceilings. */
  adaptive: Sourced<boolean>;
  /** The lowest limit an adaptive queue learns (default 1). */
  adaptive_min: Sourced<number>;
  /** Consumed by pulling (`POST /v1/queues/{queue}/lease`), not pushed. */
  pull: Sourced<boolean>;
  /** What an enqueue does to a concurrency key with unfinished tasks. */
  key_strategy: Sourced<KeyStrategy>;
  key_from: string | null;
  url: string | null;
  max_attempts: number;
  lease_ms: number;
  timeout_ms: number;
  counts: { pending: number; leased: number; waiting: number; dead: number };
}

export interface SlotView {
  task_id: string;
  lease_id: string;
  leased_at: string;
  expires_at: string;
}

/** A level's rate in force, where it comes from, and its grants still inside their period. */
export interface RateInUse {
  value: Rate | null;
  source: Source;
  used: number;
}

export interface LevelView {
  limit: number | null;
  source: Source;
  active: number;
}

/**
 * Who holds a queue's slots. `active` counts leases; `waiting` counts tasks waiting on children
 * that still hold a slot of the level (they did not lend it), which the claim counts too.
 */
export interface ConcurrencyView {
  queue: string;
  cluster: LevelView;
  /** Whether the queue learns its limits from its endpoint (AIMD). */
  adaptive: boolean;
  /** What an enqueue does to a concurrency key with unfinished tasks. */
  key_strategy: Sourced<KeyStrategy>;
  queue_level: QueueLevelView;
  keys: KeyLevelView[];
  keyless: { active: number; slots: SlotView[] };
}

/** A queue's or a key's level, with what it learnt from its endpoint. */
export interface LearningLevelView extends LevelView {
  /** The limit the claim applies: `limit`, or on an adaptive queue the lower one it has learnt (null: none). */
  effective: number | null;
  /** A Retry-After from one of its tasks holds the level until then. */
  held_until: string | null;
  /** Why and when the learnt limit or the hold last moved. */
  last_move: { reason: string; at: string } | null;
}

export interface QueueLevelView extends LearningLevelView {
  paused: boolean;
  rate: RateInUse;
  waiting: number;
}

export interface KeyLevelView extends LearningLevelView {
  key: string;
  rate: RateInUse;
  waiting: number;
  slots: SlotView[];
}

/** A schedule: its cron expression and zone, the task it fires, and what its last slot did. */
export interface ScheduleView {
  name: string;
  cron: string;
  timezone: string;
  overlap: 'skip' | 'queue' | 'allow';
  paused: boolean;
  next_fire_at: string | null;
  last_slot_at: string | null;
  last_outcome: 'fired' | 'skipped' | null;
  last_task_id: string | null;
  fired: number;
  skipped: number;
  missed: number;
  /** The task each firing enqueues, every default resolved; header values are not shown. */
  task: {
    queue: string;
    url: string | null;
    method: HttpMethod;
    concurrency_key: string | null;
    concurrency_limit: number | null;
    rate_limit: Rate | null;
    priority: number;
    ttl_ms: number | null;
    max_attempts: number;
    backoff: { initial_ms: number; max_ms: number; factor: number; jitter: number };
    timeout_ms: number;
    lease_ms: number;
    content_type: string;
    header_names: string[];
    body?: unknown;
    body_text?: string | null;
  };
  created_at: string;
  updated_at: string;
}

/** An endpoint group (GET /v1/groups/:name): a name for the URLs an enqueue naming it fans out to. */
export interface GroupView {
  name: string;
  /** As the target check wrote each: one task per URL, in this order. */
  urls: string[];
  created_at: string;
  updated_at: string;
}

export interface GroupList {
  groups: GroupView[];
  next_cursor: string | null;
}

/** An endpoint origin Sluice pushes to, and its health (GET /v1/endpoints). */
export interface EndpointView {
  /** Scheme, host and port, as `new URL(url).origin` says it. */
  origin: string;
  /** `paused`: its tasks wait, using no attempt; `probing`: one task is out to see whether it answers again. */
  state: 'healthy' | 'paused' | 'probing';
  /** Failures (no connection, a timeout, a 5xx) since its last 2xx. */
  consecutive_failures: number;
  attempts_5m: number;
  failures_5m: number;
  last_error: string | null;
  last_error_at: string | null;
  /** Paused: when its next probe may go; probing: when the probe's lease ends; null when paused by hand. */
  paused_until: string | null;
  paused_by: 'failures' | 'hand' | null;
  /** A Retry-After from it holds its tasks until then. */
  held_until: string | null;
}
