/**
 * A usage request's settle on the HTTP surfaces (docs/usage.md): `c.get("rateLimit").settle(units)`
 * for an app that knows what it used, and the middleware's own settle from the response
 * (readUsage) when the app did not. Once per request: a second call answers the first's outcome.
 */
import type { RuleConfig } from "../config/rule-schema";
import type { UsageSpec } from "../config/usage-schema";
import type { Limiter } from "../limiter/limiter-api";
import type { Decision, SettleOutcome } from "../limiter/types";
import type { RulesOutcome } from "../rules/outcome";
import { readUsage } from "./read-usage";

/** What settling a request does, once; `settled` says whether it was asked for yet. */
export interface UsageSettler {
  settle(units: number): Promise<SettleOutcome>;
  readonly settled: boolean;
}

const RANK: Record<SettleOutcome["status"], number> = {
  failed: 3,
  settled: 2,
  "already-settled": 1,
  unknown: 0,
};

/** The settler of an admitted request counted in a usage rule; undefined for any other. */
export function usageSettler(
  outcome: RulesOutcome,
  rules: readonly RuleConfig[],
  limiter: Limiter,
): UsageSettler | undefined {
  const receipts = outcome.receipts;
  if (!outcome.allowed || !receipts || !rules.some((rule) => rule.usage)) return undefined;
  let done: Promise<SettleOutcome> | undefined;
  const settle = async (units: number): Promise<SettleOutcome> => {
    const outcomes = await Promise.all(receipts.map((receipt) => limiter.settle(receipt, units)));
    const result: SettleOutcome = { status: "unknown", policies: [], charged: [] };
    for (const one of outcomes) {
      result.policies.push(...one.policies);
      result.charged.push(...one.charged);
      if (RANK[one.status] > RANK[result.status]) result.status = one.status;
      if (one.error !== undefined) result.error ??= one.error;
    }
    // What the headers say after it: the budget left, in units.
    if (result.status === "settled") outcome.decisions = charged(outcome.decisions, result);
    return result;
  };
  return {
    settle(units) {
      done ??= settle(units);
      return done;
    },
    get settled() {
      return done !== undefined;
    },
  };
}

/** Each settled rule's decision with what was charged (or given back) off its remaining. */
function charged(decisions: Decision[], result: SettleOutcome): Decision[] {
  return decisions.map((decision) => {
    const i = result.policies.indexOf(decision.policy);
    const units = i < 0 ? 0 : (result.charged[i] ?? 0);
    if (units === 0) return decision;
    const remaining = Math.min(decision.limit, Math.max(0, decision.remaining - units));
    return { ...decision, remaining };
  });
}

/**
 * After the app answered: settle from its response when the app did not settle itself, by the
 * first usage rule's spec. No usage read (no header, no field, an event stream), or a 5xx a
 * `refundOn` rule gave back: the reservation stands.
 */
export async function settleFromResponse(
  settler: UsageSettler,
  rules: readonly RuleConfig[],
  response: Response,
): Promise<void> {
  if (settler.settled) return;
  if (response.status >= 500 && rules.some((rule) => rule.refundOn === "5xx")) return;
  const spec = rules.find((rule) => rule.usage)?.usage as UsageSpec;
  const units = await readUsage(response, spec);
  if (units !== undefined) await settler.settle(units);
}
