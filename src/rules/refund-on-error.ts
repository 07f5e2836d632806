/**
 * The refund step: a request the origin (or the app) failed with a 5xx is given back in the rules
 * that say `refundOn: "5xx"`, so a client is not charged for the server's errors.
 */
import type { RuleConfig } from "../config/rule-schema";
import type { Limiter } from "../limiter/types";
import type { RulesOutcome } from "./decide";

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
 * Resolves to the policies refunded.
 */
export async function refundOnServerError(
  outcome: RulesOutcome,
  rules: readonly RuleConfig[],
  responseStatus: number,
  limiter: Limiter,
  onRefundFailed?: (event: RefundFailedEvent) => void,
): Promise<string[]> {
  if (responseStatus < 500 || !outcome.receipts) return [];
  const refundable = rules.filter((rule) => rule.refundOn === "5xx").map((rule) => rule.name);
  if (refundable.length === 0) return [];
  const refunded: string[] = [];
  await Promise.all(
    outcome.receipts.map(async (receipt) => {
      const policies = receipt.policies.filter((policy) => refundable.includes(policy));
      if (policies.length === 0) return;
      const refundOutcome = await limiter.refund(receipt, { policies });
      if (refundOutcome.error === undefined) refunded.push(...policies);
      else onRefundFailed?.({ event: "refund-failed", policies, error: refundOutcome.error });
    }),
  );
  return refunded;
}
