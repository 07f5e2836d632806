/**
 * An ad-hoc /check's calendar quota (docs/calendar-quotas.md): `"period"`, `"timezone"` and
 * `"anchor"` in place of `"window"`, read by the rule's own schema parts and refused in the
 * rule's words.
 */
import * as v from "valibot";
import { ADHOC_POLICY_PREFIX } from "../config/limits";
import {
  anchorSchema,
  NEEDS_PERIOD,
  PERIOD_ALGORITHM,
  PERIOD_NOT_WINDOW,
  periodSchema,
  timezoneSchema,
} from "../config/period-schema";
import { invalid, type Validated } from "../config/validation";
import type { CalendarPeriod } from "../limiter/calendar-period";
import type { Algorithm } from "../store/algorithm";

/**
 * An ad-hoc calendar quota's period (`"period"`, `"timezone"`, `"anchor"`), undefined for a body
 * with a window; refused in the rule's words when the fields do not combine.
 */
export function adhocPeriod(
  body: Record<string, unknown>,
  algorithm: Algorithm,
): Validated<CalendarPeriod> | { ok: true; value: undefined } | undefined {
  if (body.period === undefined) {
    if (algorithm === "calendar") {
      return invalid("period", 'is required by algorithm "calendar" ("day", "week" or "month")');
    }
    if (body.timezone !== undefined) return invalid("timezone", NEEDS_PERIOD);
    if (body.anchor !== undefined) return invalid("anchor", NEEDS_PERIOD);
    return undefined;
  }
  if (body.window !== undefined) return invalid("period", PERIOD_NOT_WINDOW);
  if (body.algorithm !== undefined && algorithm !== "calendar") {
    return invalid("algorithm", PERIOD_ALGORITHM);
  }
  const unit = v.safeParse(periodSchema, body.period);
  if (!unit.success) return invalid("period", unit.issues[0].message);
  const timezone = v.safeParse(v.optional(timezoneSchema, "UTC"), body.timezone);
  if (!timezone.success) return invalid("timezone", timezone.issues[0].message);
  const anchor = v.safeParse(v.optional(anchorSchema), body.anchor);
  if (!anchor.success) return invalid("anchor", anchor.issues[0].message);
  const period: CalendarPeriod = { unit: unit.output, timezone: timezone.output };
  if (anchor.output !== undefined) period.anchor = anchor.output;
  return { ok: true, value: period };
}

/**
 * An ad-hoc calendar quota's name: `check.<unit>.<limit>.<zone>[.<anchor>]`, the zone's "/" as
 * "." and "+" as "p" (POLICY_NAME's characters), the anchor in base 36. One counter per client
 * key, period, zone, anchor and limit, as adhocPolicyName keeps one per window and limit.
 */
export function adhocPeriodName(period: CalendarPeriod, limit: number): string {
  const zone = period.timezone.replaceAll("/", ".").replaceAll("+", "p");
  const anchor = period.anchor === undefined ? "" : `.${period.anchor.toString(36)}`;
  return `${ADHOC_POLICY_PREFIX}${period.unit}.${limit}.${zone}${anchor}`;
}
