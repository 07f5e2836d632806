/**
 * A limit override's value in the plans hash (plans.ts): the limit, or `<limit>@<anchor ms>` for
 * a calendar quota's key with its own anchor (its billing day: docs/calendar-quotas.md). The
 * evaluate script reads the same form (lua/calendar-plans.lua.ts).
 */

/** The stored form of an override. */
export function overrideValue(limit: number, anchor?: number): string {
  return anchor === undefined ? String(limit) : `${limit}@${anchor}`;
}

/** An override as stored → its limit and anchor (NaN limit for a value of neither form). */
export function readOverride(value: string): { limit: number; anchor?: number } {
  const at = value.indexOf("@");
  if (at < 0) return { limit: Number(value) };
  return { limit: Number(value.slice(0, at)), anchor: Number(value.slice(at + 1)) };
}

/** One key's override (its limit, a calendar key's own anchor) and key block in one policy. */
export interface KeyPlan {
  now: number;
  limit: number | undefined;
  anchor?: number;
  blockedUntil: number | undefined;
}
