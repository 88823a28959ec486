/**
 * The few workerd types Sluice's Durable Objects use (the full set is @cloudflare/workers-types,
 * which would pull thousands of globals into the web typecheck).
 */
declare module 'cloudflare:workers' {
  export abstract class DurableObject<Env = unknown> {
    protected readonly ctx: DurableObjectState;
    protected readonly env: Env;
    constructor(ctx: DurableObjectState, env: Env);
  }
}

interface DurableObjectState {
  readonly storage: DurableObjectStorage;
  waitUntil(promise: Promise<unknown>): void;
}

interface DurableObjectStorage {
  /** The one alarm's time (epoch ms), or null. Inside `alarm()`, null unless set since it started. */
  getAlarm(): Promise<number | null>;
  /** Replaces the alarm; a time at or before now runs it as soon as possible. */
  setAlarm(scheduledTime: number | Date): Promise<void>;
  deleteAlarm(): Promise<void>;
  get<T>(key: string): Promise<T | undefined>;
  put<T>(key: string, value: T): Promise<void>;
}

interface DurableObjectId {
  toString(): string;
}

/** A namespace binding; `get` returns a stub whose methods are the object's RPC methods. */
/** Where an object is created (honoured at its creation only). */
type DurableObjectLocationHint = 'wnam' | 'enam' | 'sam' | 'weur' | 'eeur' | 'apac' | 'oc' | 'afr' | 'me';

interface DurableObjectNamespace<T> {
  idFromName(name: string): DurableObjectId;
  get(id: DurableObjectId, options?: { locationHint?: DurableObjectLocationHint }): T;
}
