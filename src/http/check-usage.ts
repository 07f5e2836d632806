/**
 * /check's `usage` field (docs/usage.md): `true` counts an ad-hoc limit in the weighted log and
 * answers a receipt to settle; with named rules, a rule with `usage` answers one anyway.
 */
import { invalid, type Validated } from "../config/validation";
import type { LimitRequest } from "../limiter/types";
import type { Algorithm } from "../store/algorithm";

type Body = Record<string, unknown>;

/** Why an ad-hoc check's usage is refused with another algorithm than the log's, or a period. */
const ADHOC_USAGE =
  'counts an ad-hoc check in the sliding log only ("sliding-log" or "sliding-log-weighted"): name a configured usage rule to count usage in a fixed window or a calendar period';

/** The field itself: a boolean, and not with a calendar period (a quota is not settled yet). */
export function usageFieldIssue(body: Body): Validated<never> | undefined {
  if (body.usage !== undefined && typeof body.usage !== "boolean") {
    return invalid("usage", "must be true or false");
  }
  if (body.usage === true && body.period !== undefined) {
    return invalid("usage", ADHOC_USAGE);
  }
  return undefined;
}

/** Whether a check's policies count usage (its answer carries a receipt), or why `usage` is wrong. */
export function checkUsage(body: Body, named: boolean, requests: readonly LimitRequest[]) {
  const usage = requests.some((r) => r.usage === true || r.algorithm === "sliding-log-weighted");
  if (named && body.usage === true && !usage) {
    return invalid(
      "usage",
      "applies to rules with a usage spec, and none of the named rules has one",
    );
  }
  return { ok: true as const, value: usage };
}

/** An ad-hoc check's algorithm: with `usage`, the sliding log weighs each admission. */
export function adhocAlgorithm(body: Body, algorithm: Algorithm): Validated<Algorithm> {
  if (body.usage !== true) return { ok: true, value: algorithm };
  if (algorithm !== "sliding-log" && algorithm !== "sliding-log-weighted") {
    return invalid("usage", ADHOC_USAGE);
  }
  return { ok: true, value: "sliding-log-weighted" };
}
