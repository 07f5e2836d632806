import type { ClientIpConfig, RuleConfig } from "../config/limiter-config";
import { MAX_REQUEST_ID_LENGTH } from "../config/limits";
import type { Decision, Limiter, LimitRequest, RefundReceipt } from "../limiter/types";
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
  /** The enforced rule that denied with the longest wait (the one Retry-After honours). */
  deniedBy?: string;
  /** Shadow rules that would have denied (logged, never enforced). */
  shadowDenied: string[];
  /** The enforced rules' answer is the stored one of an earlier request with this request id. */
  replayed?: boolean;
  /** Set when a rule with `missingKey: "deny"` found no key material: nothing was counted. */
  missingKey?: { rule: string; key: string };
  /**
   * What a refund needs (one receipt for the enforced rules, one for the shadow rules), when
   * the store counted the request now; see `refundFailed`.
   */
  receipts?: RefundReceipt[];
}

export interface DecideOptions {
  limiter: Limiter;
  clientIp: ClientIpConfig;
  /** Overrides every rule's `key` spec (the middleware's key function). */
  keyOf?: (rule: RuleConfig) => Promise<string | undefined>;
  /** The request id (from the configured headers): a retry is counted once. */
  requestId?: string;
  /** Called once per shadow rule that would have denied (the worker logs it). @default none */
  onShadowDeny?: (event: ShadowDenyEvent) => void;
}

/** A shadow rule that would have denied this request: what to log or count. */
export interface ShadowDenyEvent {
  event: "shadow-deny";
  policy: string;
  limit: number | undefined;
  retryAfterMs: number | undefined;
  source: Decision["source"] | undefined;
}

/**
 * Decides one request against every rule that applies; it passes only if all enforced rules
 * allow. Keys are resolved first, so a request refused for missing key material counts nowhere.
 * The enforced rules are decided by one limiter call, all or nothing: a request one rule denies
 * consumes nothing in the others. Shadow rules are decided by a second call in parallel, so a
 * shadow denial never keeps the enforced rules from counting (nor the reverse).
 */
export async function decideRules(
  rules: readonly RuleConfig[],
  headers: Headers,
  options: DecideOptions,
): Promise<RulesOutcome> {
  const keyed: { rule: RuleConfig; key: string }[] = [];
  // One derivation per key spec: rules sharing "header:x-api-key" hash the header once.
  const bySpec = new Map<string, Promise<string | undefined>>();
  const keyFor = (rule: RuleConfig) => {
    let key = bySpec.get(rule.key);
    if (!key) {
      key = clientKey(rule.key, headers, options.clientIp);
      bySpec.set(rule.key, key);
    }
    return key;
  };
  for (const rule of rules) {
    const key = options.keyOf ? await options.keyOf(rule) : await keyFor(rule);
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

  const enforced = keyed.filter(({ rule }) => !rule.shadow);
  const shadow = keyed.filter(({ rule }) => rule.shadow);
  const limitOptions = options.requestId !== undefined ? { requestId: options.requestId } : {};
  const [enforcedResult, shadowResult] = await Promise.all(
    [enforced, shadow].map((group) =>
      group.length === 0
        ? undefined
        : options.limiter.limitAll(
            group.map(({ rule, key }) => ruleRequest(rule, key)),
            limitOptions,
          ),
    ),
  );
  // Back in rule order.
  const byPolicy = new Map<string, Decision>();
  for (const decision of [
    ...(enforcedResult?.decisions ?? []),
    ...(shadowResult?.decisions ?? []),
  ]) {
    byPolicy.set(decision.policy, decision);
  }
  const decisions = keyed.map(({ rule }) => byPolicy.get(rule.name) as Decision);
  const violated = (enforcedResult?.decisions ?? [])
    .filter((decision) => !decision.allowed)
    .map((decision) => decision.policy);
  const shadowDenied = (shadowResult?.decisions ?? [])
    .filter((decision) => !decision.allowed)
    .map((decision) => decision.policy);
  for (const policy of options.onShadowDeny ? shadowDenied : []) {
    const decision = byPolicy.get(policy);
    options.onShadowDeny?.({
      event: "shadow-deny",
      policy,
      limit: decision?.limit,
      retryAfterMs: decision?.retryAfterMs,
      source: decision?.source,
    });
  }
  const receipts = [enforcedResult?.receipt, shadowResult?.receipt].filter(
    (receipt): receipt is RefundReceipt => receipt !== undefined,
  );
  return {
    allowed: enforcedResult?.allowed ?? true,
    decisions,
    violated,
    ...(enforcedResult?.deniedBy !== undefined ? { deniedBy: enforcedResult.deniedBy } : {}),
    shadowDenied,
    ...(enforcedResult?.replayed ? { replayed: true } : {}),
    ...(receipts.length > 0 ? { receipts } : {}),
  };
}

/** What the limiter decides for a rule and a client key (the proxy, middleware and /check alike). */
export function ruleRequest(rule: RuleConfig, key: string, cost = rule.cost): LimitRequest {
  return {
    policy: rule.name,
    key,
    limit: rule.limit,
    windowMs: rule.windowMs,
    cost,
    algorithm: rule.algorithm,
    ...(rule.failMode ? { failMode: rule.failMode } : {}),
  };
}

/** A refund the store did not carry out: what to log (the library itself writes nothing). */
export interface RefundFailedEvent {
  event: "refund-failed";
  policies: string[];
  error: string;
}

/**
 * After the origin (or the app) answered: when it answered 5xx, give back what the request
 * consumed in the rules that say `refundOn: "5xx"` (and forget this isolate's cached denials of
 * those keys). Never throws; resolves to the policies refunded.
 */
export async function refundFailed(
  outcome: RulesOutcome,
  rules: readonly RuleConfig[],
  status: number,
  limiter: Limiter,
  onError?: (event: RefundFailedEvent) => void,
): Promise<string[]> {
  if (status < 500 || !outcome.receipts) return [];
  const refundable = rules.filter((rule) => rule.refundOn === "5xx").map((rule) => rule.name);
  if (refundable.length === 0) return [];
  const refunded: string[] = [];
  await Promise.all(
    outcome.receipts.map(async (receipt) => {
      const policies = receipt.policies.filter((policy) => refundable.includes(policy));
      if (policies.length === 0) return;
      const result = await limiter.refund(receipt, { policies });
      if (result.error === undefined) refunded.push(...policies);
      else onError?.({ event: "refund-failed", policies, error: result.error });
    }),
  );
  return refunded;
}

/** The request id: the value of the first configured header present (bounded in length). */
export function requestIdFrom(headers: Headers, names: readonly string[]): string | undefined {
  for (const name of names) {
    const value = headers.get(name)?.trim();
    if (value) return value.length > MAX_REQUEST_ID_LENGTH ? undefined : value;
  }
  return undefined;
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
