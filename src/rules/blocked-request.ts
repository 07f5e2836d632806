/**
 * A request refused by a network block (docs/plans.md) before its decision: the blocks matched
 * from the isolate's copy (before any key is derived), and what that block decided per rule.
 * The outcome a block answers with is decide.ts's, whatever found it (a network block here, a
 * key block in the store).
 */
import type { ClientIpConfig } from "../config/client-ip-config";
import type { RuleConfig } from "../config/rule-schema";
import type { Decision } from "../limiter/types";
import type { NetworkBlocks, NetworkIdentity } from "../net/network-blocks";
import { trustedAddress } from "./client-key";
import type { RequestBlock, RulesOutcome } from "./outcome";

/** What a network block match reads of the decision's options (decide.ts DecideOptions). */
export interface NetworkBlockOptions {
  clientIp: ClientIpConfig;
  /** The request's country and AS number, and its client's own address when read apart. */
  network?: NetworkIdentity | undefined;
  waitUntil?: ((promise: Promise<unknown>) => void) | undefined;
}

/**
 * The outcome of a request a network block refuses, before any key is derived or anything
 * counted; undefined when none does. Enforced rules only (a shadow rule never denies).
 */
export async function networkBlockOutcome(
  rules: readonly RuleConfig[],
  headers: Headers,
  options: NetworkBlockOptions,
  blocks: NetworkBlocks,
): Promise<RulesOutcome | undefined> {
  const blocked = await networkBlock(rules, headers, options, blocks);
  if (!blocked) return undefined;
  const { block } = blocked;
  const decisions = networkBlockDecisions(rules, block, blocked.one);
  return {
    allowed: false,
    decisions,
    violated: [block.rule],
    deniedBy: block.rule,
    shadowDenied: [],
    blocked: block,
  };
}

/** The network block that refuses this request, if any. */
async function networkBlock(
  rules: readonly RuleConfig[],
  headers: Headers,
  options: NetworkBlockOptions,
  blocks: NetworkBlocks,
): Promise<{ block: RequestBlock; one: boolean } | undefined> {
  const enforced = rules.filter((rule) => !rule.shadow).map((rule) => rule.name);
  const [first] = enforced;
  if (first === undefined) return undefined;
  // The address itself, not its group: a block may be narrower than the grouping.
  const identity: NetworkIdentity = {
    ...options.network,
    ip: options.network?.ip ?? trustedAddress(headers, options.clientIp),
  };
  const hit = await blocks.match(identity, enforced, options.waitUntil);
  if (!hit) return undefined;
  const block: RequestBlock = { rule: hit.rule ?? first, by: hit.by, value: hit.value };
  if (hit.until !== undefined) block.until = hit.until;
  return { block, one: hit.rule !== undefined };
}

/**
 * What a network block decided for each enforced rule it refused (the analytics count them, as
 * source "block"): nothing was asked or counted.
 */
function networkBlockDecisions(
  rules: readonly RuleConfig[],
  block: RequestBlock,
  /** The block names one rule (else every rule). */
  one: boolean,
): Decision[] {
  const now = Date.now();
  const wait = block.until === undefined ? 0 : Math.max(0, block.until - now);
  return rules
    .filter((rule) => !rule.shadow && (block.rule === rule.name || !one))
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
}
