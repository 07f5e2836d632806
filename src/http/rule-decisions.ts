import type { ClientIpConfig, RuleConfig } from "../config/limiter-config";
import type { Decision } from "../limiter/decision";
import type { Limiter } from "../limiter/limiter";
import { clientKey } from "./client-key";

/** The client key of every request that lacks key material, under `missingKey: "shared"`. */
export const MISSING_KEY = "(missing)";

/** What the rules that apply to one request decided together. */
export interface RulesOutcome {
  /** True when every enforced rule allowed (shadow rules never deny). */
  allowed: boolean;
  /** One truthful decision per evaluated rule, in rule order. */
  decisions: Decision[];
  /** Enforced rules that denied: the policies a 429 names. */
  violated: string[];
  /** Shadow rules that would have denied (logged, never enforced). */
  shadowDenied: string[];
  /** Set when a rule with `missingKey: "deny"` found no key material: nothing was counted. */
  missingKey?: { rule: string; key: string };
}

export interface DecideOptions {
  limiter: Limiter;
  clientIp: ClientIpConfig;
  /** Overrides every rule's `key` spec (the middleware's key function). */
  keyOf?: (rule: RuleConfig) => Promise<string | undefined>;
}

/**
 * Decides one request against every rule that applies; it passes only if all enforced rules
 * allow. Keys are resolved first, so a request refused for missing key material counts nowhere.
 * The rules are then decided in parallel, one limiter call each: a request one rule denies may
 * still have consumed a unit of the others (atomic multi-rule decisions are a later issue).
 */
export async function decideRules(
  rules: readonly RuleConfig[],
  headers: Headers,
  options: DecideOptions,
): Promise<RulesOutcome> {
  const keyed: { rule: RuleConfig; key: string }[] = [];
  for (const rule of rules) {
    const key = options.keyOf
      ? await options.keyOf(rule)
      : await clientKey(rule.key, headers, options.clientIp);
    if (key !== undefined) keyed.push({ rule, key });
    else if (rule.missingKey === "shared") keyed.push({ rule, key: MISSING_KEY });
    else if (rule.missingKey === "deny") {
      return {
        allowed: false,
        decisions: [],
        violated: [],
        shadowDenied: [],
        missingKey: { rule: rule.name, key: rule.key },
      };
    }
    // "skip": the rule does not apply to this request.
  }

  const decisions = await Promise.all(
    keyed.map(({ rule, key }) =>
      options.limiter.limit({
        policy: rule.name,
        key,
        limit: rule.limit,
        windowMs: rule.windowMs,
        cost: rule.cost,
        ...(rule.failMode ? { failMode: rule.failMode } : {}),
      }),
    ),
  );
  const violated: string[] = [];
  const shadowDenied: string[] = [];
  decisions.forEach((decision, i) => {
    if (decision.allowed) return;
    const rule = keyed[i]?.rule;
    if (rule?.shadow) shadowDenied.push(rule.name);
    else violated.push(decision.policy);
  });
  for (const policy of shadowDenied) {
    const decision = decisions.find((d) => d.policy === policy);
    console.log(
      JSON.stringify({
        event: "shadow-deny",
        policy,
        limit: decision?.limit,
        retryAfterMs: decision?.retryAfterMs,
        source: decision?.source,
      }),
    );
  }
  return { allowed: violated.length === 0, decisions, violated, shadowDenied };
}

/**
 * The decisions as the response headers should describe them: a shadow rule's denial is not
 * enforced, so it must not produce a Retry-After on a response that went through.
 */
export function enforcedDecisions(outcome: RulesOutcome): Decision[] {
  return outcome.decisions.map((decision) =>
    !decision.allowed && outcome.shadowDenied.includes(decision.policy)
      ? { ...decision, allowed: true, retryAfterMs: 0 }
      : decision,
  );
}
