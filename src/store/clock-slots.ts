/**
 * Which ARGV of a script carries its clock: declared once, next to the script's text, for every
 * script that can read the Redis clock (TIME). The script runner (script-runner.ts) reads it to
 * pass the caller's clock there when the store refuses TIME, whoever calls the script; a script
 * that reads TIME without a declared slot is refused by the runner before it is sent, so a new
 * script cannot forget it.
 */

/** The slot of a script whose clock is its last ARGV. */
export const LAST_ARG = -1;

// By script text (the same strings the runner is given; the SHA cache is keyed alike).
const slots = new Map<string, number>();

/**
 * Declares that `script` reads its clock from ARGV index `slot` (0-based; LAST_ARG: the last):
 * the caller's ms there, or "" for the Redis clock. Returns the script.
 */
export function clockedScript(script: string, slot: number): string {
  slots.set(script, slot);
  return script;
}

// Scripts seen without a declaration, by whether they read TIME (scanned once each). Ours are a
// handful; bounded anyway, as a cache of whatever else a caller runs.
const undeclared = new Map<string, boolean>();
const MAX_UNDECLARED = 64;
const READS_TIME = /redis\.p?call\(\s*['"]TIME['"]/i;

/**
 * The ARGV index of `script`'s clock in a call with `argCount` arguments; undefined for a
 * script that never reads TIME. Throws (a TypeError, before anything is sent) for a script that
 * reads TIME with no declared slot: its refusal could not be retried on the caller's clock.
 */
export function clockSlotOf(script: string, argCount: number): number | undefined {
  const slot = slots.get(script);
  if (slot !== undefined) return slot < 0 ? argCount + slot : slot;
  let readsTime = undeclared.get(script);
  if (readsTime === undefined) {
    readsTime = READS_TIME.test(script);
    if (undeclared.size >= MAX_UNDECLARED) undeclared.clear();
    undeclared.set(script, readsTime);
  }
  if (readsTime) {
    throw new TypeError("a script that reads TIME must declare its clock slot (clockedScript)");
  }
  return undefined;
}
