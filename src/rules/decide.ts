/**
 * src/rules/: what a request's rules decide, with no HTTP in it. This folder owns matching a
 * request to its rules (match.ts, path-readings.ts), the client key each rule counts under
 * (client-key.ts), deciding a request (this file: a network block's refusal, then every
 * applying rule in one limiter call; the blocks' copy it matches is net/'s) and giving a request
 * back when the origin failed (refund-on-error.ts). It takes the parts of an incoming request it
 * needs (method, path, headers) as plain values, so the proxy, the middleware and tests drive it
 * alike. It imports config/, the limiter's public types and net/; the Limiter it calls is handed
 * in (npm run lint holds the layers).
 *
 * This file: one request's applying rules → one RulesOutcome, in one pass: a network block
 * matched from the isolate's copy refuses first (before any key is derived), then the keys are
 * resolved (client-key.ts), then the enforced rules and the shadow rules are each decided by one
 * `limiter.limitAll` call. A block's outcome is the same whatever found it (a network block
 * here, a key block in the store).
 */
import type { ClientIpConfig } from "../config/client-ip-config";
import type { RuleConfig } from "../config/rule-schema";
import type { Limiter } from "../limiter/limiter-api";
import type {
  ConcurrencySlot,
  Decision,
  LimitAllOptions,
  LimitRequest,
  MultiDecision,
  RefundReceipt,
} from "../limiter/types";
import type { NetworkBlocks, NetworkIdentity } from "../net/network-blocks";
import { ruleKeys } from "./client-key";
import type { RequestBlock, RulesOutcome } from "./outcome";

/**
 * How to decide. Optional members may be present as undefined, so a caller passes what it holds
 * without building a new object per request.
 */
export interface DecideOptions {
  limiter: Limiter;
  clientIp: ClientIpConfig;
  /** Overrides every rule's `key` spec (the middleware's key function). */
  keyOf?: ((rule: RuleConfig) => Promise<string | undefined>) | undefined;
  /** The request id (from the configured headers): a retry is counted once. */
  requestId?: string | undefined;
  /** Keeps background store calls (leases) alive past the response: `ctx.waitUntil`. */
  waitUntil?: ((promise: Promise<unknown>) => void) | undefined;
  /** The request's region (docs/regions.md); undefined: the limiter's `regionOf`, else home. */
  region?: string | undefined;
  /** The isolate's copy of the network blocks (docs/plans.md). @default none checked */
  networkBlocks?: NetworkBlocks | undefined;
  /**
   * The request's country, AS number and client address (trusted, ungrouped), for network
   * blocks: given with `networkBlocks` (http/incoming-request.ts reads it).
   */
  network?: NetworkIdentity | undefined;
  /** Called once per shadow rule that would have denied (the worker logs it). @default none */
  onShadowDeny?: ((event: ShadowDenyEvent) => void) | undefined;
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
  // A network block refuses before any key is derived or anything counted.
  const blocked = options.networkBlocks
    ? await networkBlockOutcome(rules, options, options.networkBlocks)
    : undefined;
  if (blocked) return blocked;
  const keys = await ruleKeys(rules, headers, options.clientIp, options.keyOf);
  if ("missing" in keys) {
    return {
      allowed: false,
      decisions: [],
      violated: [],
      shadowDenied: [],
      missingKey: keys.missing,
    };
  }
  const { keyed } = keys;
  const requests = keyed.map(({ rule, key }) => ruleRequest(rule, key));

  const shadowRules = new Set(keyed.filter(({ rule }) => rule.shadow).map(({ rule }) => rule.name));
  const limitOptions: LimitAllOptions = {
    ...(options.requestId !== undefined ? { requestId: options.requestId } : {}),
    ...(options.waitUntil ? { waitUntil: options.waitUntil } : {}),
    ...(options.region !== undefined ? { region: options.region } : {}),
  };
  const { enforcedDecided, shadowDecided, decisions, shadowDenied, slots } = await limitWithShadow(
    options.limiter,
    requests,
    shadowRules,
    limitOptions,
  );
  const byPolicy = new Map(decisions.map((decision: Decision) => [decision.policy, decision]));
  const violated = (enforcedDecided?.decisions ?? [])
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
  const receipts = [enforcedDecided?.receipt, shadowDecided?.receipt].filter(
    (receipt): receipt is RefundReceipt => receipt !== undefined,
  );
  const keyBlock = enforcedDecided?.blocked;
  if (keyBlock) {
    // Nothing counts for a blocked request: the shadow rules, decided beside it, give theirs back.
    const shadowReceipt = shadowDecided?.receipt;
    if (shadowReceipt) options.waitUntil?.(options.limiter.refund(shadowReceipt));
    const block: RequestBlock = { rule: keyBlock.policy, by: "key" };
    if (keyBlock.until !== undefined) block.until = keyBlock.until;
    // A block's outcome, as a network block's (networkBlockOutcome): no rule counted, 403.
    const { rule } = block;
    return {
      allowed: false,
      decisions,
      violated: [rule],
      deniedBy: rule,
      shadowDenied: [],
      blocked: block,
    };
  }
  return {
    allowed: enforcedDecided?.allowed ?? true,
    decisions,
    violated,
    ...(enforcedDecided?.deniedBy !== undefined ? { deniedBy: enforcedDecided.deniedBy } : {}),
    shadowDenied,
    ...(enforcedDecided?.replayed ? { replayed: true } : {}),
    ...(enforcedDecided?.conflict ? { conflict: enforcedDecided.conflict } : {}),
    ...(receipts.length > 0 ? { receipts } : {}),
    ...(slots ? { slots } : {}),
  };
}

/**
 * The outcome of a request a network block refuses, before any key is derived or anything
 * counted; undefined when none does. Enforced rules only (a shadow rule never denies).
 */
async function networkBlockOutcome(
  rules: readonly RuleConfig[],
  options: Pick<DecideOptions, "network" | "waitUntil">,
  blocks: NetworkBlocks,
): Promise<RulesOutcome | undefined> {
  const enforced = rules.filter((rule) => !rule.shadow).map((rule) => rule.name);
  const [first] = enforced;
  if (first === undefined) return undefined;
  const hit = await blocks.match(options.network ?? {}, enforced, options.waitUntil);
  if (!hit) return undefined;
  const block: RequestBlock = { rule: hit.rule ?? first, by: hit.by, value: hit.value };
  if (hit.until !== undefined) block.until = hit.until;
  // What the block decided for each enforced rule it refused (the analytics count them, as
  // source "block"): nothing was asked or counted.
  const now = Date.now();
  const wait = block.until === undefined ? 0 : Math.max(0, block.until - now);
  const decisions: Decision[] = rules
    .filter((rule) => !rule.shadow && (block.rule === rule.name || hit.rule === undefined))
    .map((rule) => ({
      allowed: false,
      limit: rule.limit,
      remaining: 0,
      reset: now + wait,
      resetAfterMs: wait,
      retryAfterMs: wait,
      source: "block" as const,
      policy: rule.name,
      windowMs: rule.windowMs,
      algorithm: rule.algorithm,
    }));
  return {
    allowed: false,
    decisions,
    violated: [block.rule],
    deniedBy: block.rule,
    shadowDenied: [],
    blocked: block,
  };
}

/**
 * Requests some of which are shadow rules' (by policy name), decided as the proxy, the
 * middleware and /check decide them: the enforced ones by one limiter call, all or nothing, the
 * shadow ones by a second in parallel, so a shadow denial never keeps the enforced rules from
 * counting (nor the reverse). Each group's MultiDecision (undefined for an empty group), every
 * decision back in the requests' order, the shadow policies that would have denied, and the
 * concurrency slots the request holds: both groups' when the enforced rules allow, none when
 * they refuse.
 */
export async function limitWithShadow(
  limiter: Limiter,
  requests: readonly LimitRequest[],
  shadow: ReadonlySet<string>,
  options: LimitAllOptions,
): Promise<{
  enforcedDecided: MultiDecision | undefined;
  shadowDecided: MultiDecision | undefined;
  decisions: Decision[];
  shadowDenied: string[];
  slots: ConcurrencySlot[] | undefined;
}> {
  const enforced = requests.filter((r) => !shadow.has(r.policy));
  const shadowed = requests.filter((r) => shadow.has(r.policy));
  const [enforcedDecided, shadowDecided] = await Promise.all(
    [enforced, shadowed].map((group) =>
      group.length === 0 ? undefined : limiter.limitAll(group, options),
    ),
  );
  const byPolicy = new Map<string, Decision>();
  for (const d of [...(enforcedDecided?.decisions ?? []), ...(shadowDecided?.decisions ?? [])]) {
    byPolicy.set(d.policy, d);
  }
  // A refused limitAll holds no slots; a refused request holds none either: a shadow rule's slot
  // taken beside the enforced rules' refusal goes back now, not when a response ends.
  let slots = shadowDecided?.slots;
  if (slots && enforcedDecided && !enforcedDecided.allowed) {
    // release never rejects, and its waitUntil keeps it alive: nothing to await here.
    void limiter.release(slots, options);
    slots = undefined;
  }
  const enforcedSlots = enforcedDecided?.slots;
  if (enforcedSlots) slots = slots ? [...enforcedSlots, ...slots] : enforcedSlots;
  return {
    enforcedDecided,
    shadowDecided,
    decisions: requests.map((r) => byPolicy.get(r.policy) as Decision),
    shadowDenied: (shadowDecided?.decisions ?? []).filter((d) => !d.allowed).map((d) => d.policy),
    slots,
  };
}

/**
 * The limiter's LimitRequest for a rule and a client key: what the proxy, the middleware and
 * /check alike hand `limitAll`.
 */
export function ruleRequest(rule: RuleConfig, key: string, cost = rule.cost): LimitRequest {
  return {
    policy: rule.name,
    key,
    limit: rule.limit,
    windowMs: rule.windowMs,
    cost,
    algorithm: rule.algorithm,
    ...(rule.period ? { period: rule.period } : {}),
    ...(rule.failMode ? { failMode: rule.failMode } : {}),
    ...(rule.lease ? { lease: true } : {}),
    ...(rule.overrides ? { overrides: true } : {}),
    ...(rule.usage ? { usage: true } : {}),
  };
}

/**
 * The decisions as the response headers should describe them: a shadow rule's denial is not
 * enforced, so it must not produce a Retry-After on a response that went through.
 */
export function enforcedDecisions(
  outcome: Pick<RulesOutcome, "decisions" | "shadowDenied">,
): Decision[] {
  return outcome.decisions.map((decision) =>
    !decision.allowed && outcome.shadowDenied.includes(decision.policy)
      ? { ...decision, allowed: true, retryAfterMs: 0 }
      : decision,
  );
}
