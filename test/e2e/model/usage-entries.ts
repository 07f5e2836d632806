/**
 * What the usage references share (usage-reference.ts: the weighted log; usage-count-reference.ts:
 * a window's or a period's count): an admission's units and settle, and its reset.
 */
import type { Admission, Reference } from "./reference";

export type SettleStatus = "settled" | "already-settled" | "unknown" | "failed";

/** The units an entry may hold now (the larger, when a settle's outcome is unknown). */
export function unitsOf(a: Admission): number {
  const settled = a.settled?.units ?? a.cost;
  return a.settleUncertain === undefined ? settled : Math.max(settled, a.settleUncertain);
}

/** Whether an entry was surely settled before step `seq`. */
export const settledBefore = (a: Admission, seq: number) =>
  a.settled !== undefined && a.settled.seq < seq && a.settleUncertain === undefined;

/** Whether a reset of the key came after this admission (its entry is gone). */
export function resetAfter(ref: Reference, a: Admission): { ok: boolean } | undefined {
  return ref.resets.get(`${a.policy.policy}\u0000${a.key}`)?.find((r) => r.seq > a.seq);
}
