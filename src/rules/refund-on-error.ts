/**
 * The refund step: a request the origin (or the app) failed with a 5xx is given back in the rules
 * that say `refundOn: "5xx"`, so a client is not charged for the server's errors.
 */
import type { RuleConfig } from "../config/rule-schema";
import type { Limiter } from "../limiter/limiter-api";
import type { RulesOutcome } from "./outcome";

/** A refund the store did not carry out: what to log (the library itself writes nothing). */
export interface RefundFailedEvent {
  event: "refund-failed";
  policies: string[];
  error: string;
}

/**
 * After the origin (or the app) answered: when it answered 5xx, give back what the request
 * consumed in the rules that say `refundOn: "5xx"` (and forget this isolate's cached denials of
 * those keys). A refund the store did not make is reported to `onRefundFailed`, never thrown.
 * Resolves to the outcome as it stands after the refund: each refunded rule's `remaining` has
 * the request's cost back (never above its limit), so the headers built from it tell the client
 * what it has now, not what it had before its request was given back. The outcome passed in is
 * left as it is (the app may hold it); when nothing was given back, it is the one returned.
 */
export async function refundOnServerError(
  outcome: RulesOutcome,
  rules: readonly RuleConfig[],
  responseStatus: number,
  limiter: Limiter,
  onRefundFailed?: (event: RefundFailedEvent) => void,
): Promise<RulesOutcome> {
  if (responseStatus < 500 || !outcome.receipts) return outcome;
  const refundable = rules.filter((rule) => rule.refundOn === "5xx").map((rule) => rule.name);
  if (refundable.length === 0) return outcome;
  const givenBack = new Map<string, number>();
  await Promise.all(
    outcome.receipts.map(async (receipt) => {
      const policies = receipt.policies.filter((policy) => refundable.includes(policy));
      if (policies.length === 0) return;
      const refundOutcome = await limiter.refund(receipt, { policies });
      if (refundOutcome.error !== undefined) {
        onRefundFailed?.({ event: "refund-failed", policies, error: refundOutcome.error });
        return;
      }
      // Not refunded: a request id whose request was already given back (or reset).
      if (!refundOutcome.refunded) return;
      // The cost as evaluated, not the store's unit count: that one is what the store could
      // prove it took off, and a token bucket that refilled a fraction of a token since the
      // request rounds it down to 0 while the bucket is full again. Remaining + cost is what
      // the client has at least (a window that moved on meanwhile can only have more).
      receipt.policies.forEach((name, i) => {
        if (policies.includes(name)) givenBack.set(name, receipt.costs[i] ?? 0);
      });
    }),
  );
  if (givenBack.size === 0) return outcome;
  return {
    ...outcome,
    decisions: outcome.decisions.map((decision) => {
      const cost = givenBack.get(decision.policy);
      return cost === undefined
        ? decision
        : { ...decision, remaining: Math.min(decision.limit, decision.remaining + cost) };
    }),
  };
}
