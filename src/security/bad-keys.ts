/**
 * A cheap brake on guessing API keys: after `max` bad keys from one client address within
 * `windowMs`, that address is refused (429, `Retry-After`) until the window ends, whatever key
 * it sends. Kept in memory, per process or Worker isolate: it slows a guesser down, it is not
 * an account lockout. Keys are 256-bit random, so guessing is hopeless anyway.
 */
export class BadKeyBrake {
  #seen = new Map<string, { count: number; until: number }>();
  #max: number;
  #windowMs: number;
  #now: () => number;

  constructor(options: { max?: number; windowMs?: number; now?: () => number } = {}) {
    this.#max = options.max ?? 20;
    this.#windowMs = options.windowMs ?? 60_000;
    this.#now = options.now ?? Date.now;
  }

  /** Milliseconds until `address` may try again; 0 when it may now. */
  blockedFor(address: string): number {
    const entry = this.#seen.get(address);
    const now = this.#now();
    if (!entry || entry.until <= now) return 0;
    return entry.count >= this.#max ? entry.until - now : 0;
  }

  /** Counts a bad key from `address`. */
  failed(address: string): void {
    const now = this.#now();
    const entry = this.#seen.get(address);
    if (entry && entry.until > now) {
      entry.count++;
      return;
    }
    // Bounded memory: a flood of addresses forgets the oldest windows first.
    if (this.#seen.size >= 10_000) this.#seen.delete(this.#seen.keys().next().value as string);
    this.#seen.set(address, { count: 1, until: now + this.#windowMs });
  }
}
