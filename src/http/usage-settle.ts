/**
 * A usage request's settle on the HTTP surfaces (docs/usage.md): `c.get("rateLimit").settle(units)`
 * for an app that knows what it used, and the surface's own settle from the response (the proxy's
 * and the middleware's: readUsage, as the body passes to the client) when the app did not. Once
 * per request: a second call answers the first's outcome.
 */
import type { RuleConfig } from "../config/rule-schema";
import type { UsageSpec } from "../config/usage-schema";
import type { Limiter } from "../limiter/limiter-api";
import { isUsage, USAGE_RANGE } from "../limiter/settle-receipt";
import type { Decision, SettleOutcome, WaitUntil } from "../limiter/types";
import type { RulesOutcome } from "../rules/outcome";
import { readUsage } from "./usage-reader";

/** What settling a request does, once; `settled` says whether it was asked for yet. */
export interface UsageSettler {
  settle(units: number): Promise<SettleOutcome>;
  readonly settled: boolean;
}

const REFUSED = `usage ${USAGE_RANGE}`;

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
      // Units a settle refuses change nothing in the store: they do not use up the request's
      // one settle, which a right figure (the app's next call, or the body's) still makes.
      if (!isUsage(units)) {
        return Promise.resolve({ status: "failed", policies: [], charged: [], error: REFUSED });
      }
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

/** The response to hand to the client, and whether its usage is read as its body passes. */
export interface SettlingResponse {
  response: Response;
  /** True while the body is read for its usage: its end (or its client's going) settles it. */
  reading: boolean;
}

/**
 * After the origin or the app answered: settle from its response when nothing settled it yet,
 * by the first usage rule's spec. A header is read and settled at once (awaited, as a refund is:
 * the headers and the client's next request see it). A JSON body or an event stream is read as it
 * passes to the client (usage-reader.ts: nothing buffered), and settled when it ends, kept alive
 * by `waitUntil`; the headers then show the budget left after the reservation. No usage read
 * (no header, no field, the body failed or its client went before the usage event), or a 5xx a
 * `refundOn` rule gave back: the reservation stands. A client gone after the usage event is
 * charged that usage: the reader answers what the complete events reported.
 */
export async function settleFromResponse(
  settler: UsageSettler,
  rules: readonly RuleConfig[],
  response: Response,
  context: { signal?: AbortSignal | undefined; waitUntil?: WaitUntil | undefined },
): Promise<SettlingResponse> {
  if (settler.settled) return { response, reading: false };
  if (response.status >= 500 && rules.some((rule) => rule.refundOn === "5xx")) {
    return { response, reading: false };
  }
  const spec = rules.find((rule) => rule.usage)?.usage as UsageSpec;
  const reading = readUsage(response, spec, { signal: context.signal });
  // Never rejects: a failed settle leaves the reservation standing, as a store down does.
  const settling = reading.usage.then(
    async (units) => {
      if (units !== undefined) await settler.settle(units);
    },
    () => {},
  );
  // The response handed back as it is: its usage is known now (a header) or never (nothing to
  // read), and the reader has resolved already.
  if (reading.response === response) {
    await settling;
    return { response, reading: false };
  }
  // Registered before the response is handed over: once it has been, only a pending waitUntil
  // keeps the request's context (and so this settle) alive when the client goes.
  context.waitUntil?.(settling);
  return { response: reading.response, reading: true };
}
