/**
 * A limit override's own anchor for a calendar quota's key (docs/calendar-quotas.md "A
 * customer's own period"), as `limiter.overrides.set` takes it.
 */
import type { Algorithm } from "../store/algorithm";
import { parseAnchor } from "./calendar-period";

/** An override's anchor as given → Unix ms (undefined: none), or why it is refused. */
export function anchorOf(
  given: string | number | undefined,
  algorithm: Algorithm | undefined,
): number | undefined | { ok: false; field: string; detail: string } {
  if (given === undefined) return undefined;
  if (algorithm !== "calendar") {
    return {
      ok: false,
      field: "anchor",
      detail: 'applies to calendar quotas only (a rule with "period"; algorithm "calendar")',
    };
  }
  const ms = typeof given === "number" && Number.isSafeInteger(given) ? given : parseAnchor(given);
  if (ms !== undefined) return ms;
  return {
    ok: false,
    field: "anchor",
    detail: 'must be an ISO-8601 instant with its offset ("2026-01-31T00:00:00Z") or Unix ms',
  };
}
