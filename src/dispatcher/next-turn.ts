/**
 * Resolves after the current turn of the event loop, without a timer's delay where the runtime
 * can (setImmediate: Node, Bun, Deno; else a zero timeout). What ends in the same turn (pushes
 * answered together, settles handed in together) is then handled together.
 */
export function nextTurn(): Promise<void> {
  const immediate = (globalThis as { setImmediate?: (f: () => void) => unknown }).setImmediate;
  return new Promise((resolve) => (immediate ? immediate(resolve) : setTimeout(resolve, 0)));
}
