/**
 * Plans changed at run time (docs/plans.md): a policy's limit for one client key, a key's block,
 * a network block. The store reads overrides and key blocks in the decision script of a policy
 * with `overrides: true`; network blocks are matched by the HTTP surfaces from each isolate's copy
 * (rules/network-blocks.ts). Results are returned, never thrown, except a store failure.
 */
import { boundedKey } from "../bounded-key";
import { type Algorithm, DEFAULT_ALGORITHM } from "../store/algorithm";
import { maxLimitOf } from "../store/caps";
import { POLICY_NAME } from "../store/keys";
import {
  keyBlockField,
  MAX_NETWORK_BLOCKS,
  MAX_PLAN_BYTES,
  MAX_PLAN_ENTRIES,
  type NetworkBlockKind,
  networkBlockField,
  networkBlocksKey,
  overrideField,
  type PlanWriteAnswer,
  plansKey,
  readPlan,
  writePlan,
} from "../store/plans";
import type { ScriptClient } from "../store/script-runner";
import type { ClockSource } from "../store/store-clock";
import { DEFAULT_PREFIX } from "./defaults";

/** Longest block with an end (s): a year. Without `seconds` a block lasts until removed. */
export const MAX_BLOCK_SECONDS = 365 * 86_400;

export interface PlanTarget {
  /** The limiter's prefix. @default "edge-limiter" */
  prefix?: string | undefined;
  /** The limiter's `clock` ("caller" for a store without TIME in scripts). @default "redis" */
  clock?: ClockSource | undefined;
  /** The policy (rule) name. */
  policy: string;
  /** The client key as the limiter counts it (a rule's key: hashed header, grouped address). */
  key: string;
}

/** A change refused (bad input, a full hash), or made: what was there before. */
export type PlanChange =
  | { ok: true; existed: boolean }
  | { ok: false; field: string; detail: string };

/**
 * Sets a policy's limit for one client key (`limit` null removes it). The limit is checked
 * against the policy's algorithm's bounds; 0 (or any limit below the cost) denies every request.
 */
export async function setOverride(
  store: ScriptClient,
  target: PlanTarget & { limit: number | null; algorithm?: Algorithm | undefined },
): Promise<PlanChange> {
  const issue = targetIssue(target);
  if (issue) return issue;
  const max = maxLimitOf(target.algorithm ?? DEFAULT_ALGORITHM);
  const { limit } = target;
  if (limit !== null && !(Number.isSafeInteger(limit) && limit >= 0 && limit <= max)) {
    return { ok: false, field: "limit", detail: `must be null or an integer from 0 to ${max}` };
  }
  const written = await writePlan(store, {
    hash: plansKey(target.prefix ?? DEFAULT_PREFIX),
    field: overrideField(target.policy, await boundedKey(target.key)),
    value: limit === null ? null : String(limit),
    max: MAX_PLAN_ENTRIES,
    maxBytes: MAX_PLAN_BYTES,
    clock: target.clock,
  });
  return planAnswer(written);
}

/** Blocks one client key in one policy, for `seconds` or until unblocked. */
export function blockKey(
  store: ScriptClient,
  target: PlanTarget & { seconds?: number | undefined },
): Promise<PlanChange> {
  return changeKeyBlocks(store, { ...target, keys: [target], block: true });
}

export function unblockKey(store: ScriptClient, target: PlanTarget): Promise<PlanChange> {
  return changeKeyBlocks(store, { ...target, keys: [target], block: false });
}

/**
 * Blocks (or unblocks) several policies' keys at once, all or none: one script call, so a
 * refusal (a full hash) or a store failure leaves none of them written. `existed`: any of them.
 */
export async function changeKeyBlocks(
  store: ScriptClient,
  change: {
    prefix?: string | undefined;
    clock?: ClockSource | undefined;
    keys: readonly { policy: string; key: string }[];
    block: boolean;
    seconds?: number | undefined;
  },
): Promise<PlanChange> {
  for (const target of change.keys) {
    const issue = targetIssue(target);
    if (issue) return issue;
  }
  const issue = change.block ? secondsIssue(change.seconds) : undefined;
  if (issue) return issue;
  const fields: string[] = [];
  for (const { policy, key } of change.keys)
    fields.push(keyBlockField(policy, await boundedKey(key)));
  const written = await writePlan(store, {
    hash: plansKey(change.prefix ?? DEFAULT_PREFIX),
    field: fields,
    value: change.block ? "0" : null,
    ttlMs: change.block && change.seconds !== undefined ? change.seconds * 1000 : 0,
    max: MAX_PLAN_ENTRIES,
    maxBytes: MAX_PLAN_BYTES,
    clock: change.clock,
  });
  return planAnswer(written);
}

export interface NetworkTarget {
  prefix?: string | undefined;
  clock?: ClockSource | undefined;
  kind: NetworkBlockKind;
  /** An address or CIDR ("ip"), a country code ("country"), an AS number ("asn"), normalized. */
  value: string;
  /** One policy; undefined: every rule. */
  policy?: string | undefined;
}

/** Blocks a network (IP/CIDR, country, ASN), for `seconds` or until unblocked. */
export async function blockNetwork(
  store: ScriptClient,
  target: NetworkTarget & { seconds?: number | undefined },
): Promise<PlanChange> {
  const issue = policyIssue(target.policy) ?? secondsIssue(target.seconds);
  if (issue) return issue;
  const written = await writePlan(store, {
    hash: networkBlocksKey(target.prefix ?? DEFAULT_PREFIX),
    field: networkBlockField(target.kind, target.value, target.policy),
    value: "0",
    ttlMs: target.seconds === undefined ? 0 : target.seconds * 1000,
    max: MAX_NETWORK_BLOCKS,
    clock: target.clock,
  });
  return written.full
    ? full(MAX_NETWORK_BLOCKS, "network blocks")
    : { ok: true, existed: written.existed };
}

export async function unblockNetwork(
  store: ScriptClient,
  target: NetworkTarget,
): Promise<PlanChange> {
  const issue = policyIssue(target.policy);
  if (issue) return issue;
  const written = await writePlan(store, {
    hash: networkBlocksKey(target.prefix ?? DEFAULT_PREFIX),
    field: networkBlockField(target.kind, target.value, target.policy),
    value: null,
    max: MAX_NETWORK_BLOCKS,
    clock: target.clock,
  });
  return { ok: true, existed: written.existed };
}

/** One key's override and key block in one policy, as the decision script would read them now. */
export async function planOf(
  store: ScriptClient,
  target: PlanTarget,
): Promise<{ limit: number | undefined; blockedUntil: number | undefined }> {
  const read = await readPlan(
    store,
    target.prefix ?? DEFAULT_PREFIX,
    target.policy,
    await boundedKey(target.key),
    { clock: target.clock },
  );
  return { limit: read.limit, blockedUntil: read.blockedUntil };
}

function targetIssue(target: PlanTarget): PlanChange | undefined {
  const issue = policyIssue(target.policy);
  if (issue) return issue;
  if (typeof target.key !== "string" || target.key.length === 0) {
    return { ok: false, field: "key", detail: "must be a non-empty string" };
  }
  return undefined;
}

function policyIssue(policy: string | undefined): PlanChange | undefined {
  if (policy !== undefined && (typeof policy !== "string" || !POLICY_NAME.test(policy))) {
    return { ok: false, field: "rule", detail: "must be 1 to 64 of A-Z a-z 0-9 _ . -" };
  }
  return undefined;
}

function secondsIssue(seconds: number | undefined): PlanChange | undefined {
  if (
    seconds !== undefined &&
    !(Number.isSafeInteger(seconds) && seconds >= 1 && seconds <= MAX_BLOCK_SECONDS)
  ) {
    return {
      ok: false,
      field: "seconds",
      detail: `must be an integer from 1 to ${MAX_BLOCK_SECONDS}`,
    };
  }
  return undefined;
}

/** An override's or key block's write as a change: refused past either bound of the plans hash. */
function planAnswer(written: PlanWriteAnswer): PlanChange {
  if (written.full) return full(MAX_PLAN_ENTRIES, "overrides and key blocks");
  if (written.fullBytes) {
    return {
      ok: false,
      field: "body",
      detail: `the overrides and key blocks hold ${MAX_PLAN_BYTES} bytes of keys and values already: remove some first`,
    };
  }
  return { ok: true, existed: written.existed };
}

function full(max: number, what: string): PlanChange {
  return {
    ok: false,
    field: "body",
    detail: `the store holds ${max} ${what} already, the most it takes: remove some first`,
  };
}
