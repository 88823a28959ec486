/**
 * The dispatcher for a long-lived process (self-hosting on Node, Bun or Deno): one run at a
 * time, started by a kick or by a timer that stands in for the cron. A kick during a run
 * makes one more run follow it, so no wake-up is lost.
 */
import type { RunReport } from './run.ts';

export class DispatchLoop {
  #running: Promise<void> | null = null;
  #again = false;
  #timer: ReturnType<typeof setInterval> | null = null;
  #run: () => Promise<RunReport>;
  #onError: (error: unknown) => void;

  constructor(run: () => Promise<RunReport>, onError: (error: unknown) => void = (e) => console.error('sluice: dispatcher run failed', e)) {
    this.#run = run;
    this.#onError = onError;
  }

  /** Starts a run now, or right after the current one. */
  wake(): void {
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.#loop();
  }

  start(intervalMs: number): void {
    this.#timer ??= setInterval(() => this.wake(), intervalMs);
    this.wake();
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    this.#again = false;
    await this.#running;
  }

  async #loop(): Promise<void> {
    do {
      this.#again = false;
      try {
        await this.#run();
      } catch (error) {
        this.#onError(error);
      }
    } while (this.#again);
    this.#running = null;
  }
}
