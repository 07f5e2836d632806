/**
 * Plans changed at run time (docs/plans.md), as the limiter's `overrides`, `blocks` and
 * `networks`: a policy's limit for one client key, a key's block, a network block, written under
 * the limiter's own prefix and on its clock. The store reads overrides and key blocks in the
 * decision script of a policy with `overrides: true`; network blocks are matched by the HTTP
 * surfaces from each isolate's copy (network-block-copies.ts). Results are returned, never
 * thrown, except a store failure (the promise rejects).
 */
import { boundedKey } from "../bounded-key";
import { networkValue } from "../net/network-values";
import { type Algorithm, DEFAULT_ALGORITHM } from "../store/algorithm";
import { maxLimitOf } from "../store/caps";
import { POLICY_NAME } from "../store/keys";
import { type KeyPlan, overrideValue } from "../store/override-value";
import { readPlan } from "../store/plan-reads";
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
  writePlan,
} from "../store/plans";
import type { LimiterContext } from "./context";
import { anchorOf } from "./override-anchor";

/** Longest block with an end (s): a year. Without `seconds` a block lasts until removed. */
const MAX_BLOCK_SECONDS = 365 * 86_400;

/** One client key in one policy, as the limiter counts it (a rule's key: hashed header, grouped address). */
export interface PlanKey {
  /** The policy (rule) name. */
  policy: string;
  /** The client key. */
  key: string;
}

/** A network block: who it names, and for which policy. */
export interface NetworkBlock {
  by: NetworkBlockKind;
  /**
   * An address or CIDR ("ip": "192.0.2.0/24", "2001:db8::/32"), a country code ("country": "GB",
   * "XX" unknown, "T1" Tor), an AS number ("asn": 13335 or "AS13335"); normalized before it is
   * stored, so any spelling of one network is one block.
   */
  value: string | number;
  /** One policy; undefined: every rule. */
  policy?: string | undefined;
}

/** A change refused (bad input, a full hash), or made: what was there before. */
export type PlanChange =
  | { ok: true; existed: boolean }
  | { ok: false; field: string; detail: string };

/** A change refused: the field at fault and why (nothing was written). */
type PlanRefusal = Extract<PlanChange, { ok: false }>;

/** A network block's change: on success also the value as stored (normalized). */
export type NetworkChange =
  | { ok: true; existed: boolean; value: string }
  | { ok: false; field: string; detail: string };

/** `limiter.overrides`: a policy's limit for one client key. */
export interface Overrides {
  /**
   * Sets the key's limit in that policy (read by a request with `overrides: true`). The limit is
   * checked against the algorithm's bounds (`algorithm`: the policy's, default "sliding-log");
   * 0 (or any limit below the cost) denies every request.
   */
  set(
    policy: string,
    key: string,
    override: {
      limit: number;
      algorithm?: Algorithm | undefined;
      /**
       * A calendar quota's own anchor for this key (its billing day): an ISO-8601 instant or
       * Unix ms, read in the policy's timezone (docs/calendar-quotas.md). Calendar policies only.
       */
      anchor?: string | number | undefined;
      /**
       * The policy is a usage rule's (LimitRequest.usage): on a fixed window or a calendar
       * period its limit is units, up to 10^12. @default false
       */
      usage?: boolean | undefined;
    },
  ): Promise<PlanChange>;
  /** Removes the key's override: the request's own limit applies again. */
  remove(policy: string, key: string): Promise<PlanChange>;
}

/** `limiter.blocks`: key blocks, read beside the overrides. */
export interface KeyBlocksAdmin {
  /**
   * Blocks the keys (one, or several policies' keys at once, all or none: one script call) for
   * `seconds` (1 to MAX_BLOCK_SECONDS) or until removed. `existed`: any of them was.
   */
  add(
    keys: PlanKey | readonly PlanKey[],
    options?: { seconds?: number | undefined },
  ): Promise<PlanChange>;
  remove(keys: PlanKey | readonly PlanKey[]): Promise<PlanChange>;
}

/** `limiter.networks`: network blocks (IP/CIDR, country, ASN). */
export interface NetworkBlocksAdmin {
  /**
   * Blocks the network for `seconds` or until removed. This isolate's copies
   * (`limiter.networkBlocks()`) reload on their next request; other isolates' within their
   * refresh.
   */
  add(block: NetworkBlock & { seconds?: number | undefined }): Promise<NetworkChange>;
  remove(block: NetworkBlock): Promise<NetworkChange>;
}

/**
 * The limiter's plan changes. `networkChanged` runs after a network block was written (or
 * refused by the store): this isolate's copies must not keep deciding from before it.
 */
export function createPlanChanges(
  ctx: LimiterContext,
  networkChanged: () => void,
): { overrides: Overrides; blocks: KeyBlocksAdmin; networks: NetworkBlocksAdmin } {
  const clockOf = () => ({ clock: ctx.clock.source });
  async function setOverride(
    target: PlanKey,
    limit: number | null,
    algorithm: Algorithm | undefined,
    anchorGiven?: string | number,
    usage?: boolean,
  ): Promise<PlanChange> {
    const issue = targetIssue(target);
    if (issue) return issue;
    const anchor = anchorOf(anchorGiven, algorithm);
    if (typeof anchor === "object") return anchor;
    const max = maxLimitOf(algorithm ?? DEFAULT_ALGORITHM, usage);
    if (limit !== null && !(Number.isSafeInteger(limit) && limit >= 0 && limit <= max)) {
      // (The HTTP route's wording: its `"limit": null` is `remove`.)
      return { ok: false, field: "limit", detail: `must be null or an integer from 0 to ${max}` };
    }
    const written = await writePlan(ctx.store, {
      hash: plansKey(ctx.prefix),
      field: overrideField(target.policy, await boundedKey(target.key)),
      value: limit === null ? null : overrideValue(limit, anchor),
      max: MAX_PLAN_ENTRIES,
      maxBytes: MAX_PLAN_BYTES,
      ...clockOf(),
    });
    return planAnswer(written);
  }

  async function changeKeyBlocks(
    given: PlanKey | readonly PlanKey[],
    block: boolean,
    seconds: number | undefined,
  ): Promise<PlanChange> {
    const keys: readonly PlanKey[] = Array.isArray(given) ? given : [given as PlanKey];
    if (keys.length === 0) return { ok: false, field: "key", detail: "name at least one key" };
    for (const target of keys) {
      const issue = targetIssue(target);
      if (issue) return issue;
    }
    const issue = block ? secondsIssue(seconds) : undefined;
    if (issue) return issue;
    const fields: string[] = [];
    for (const { policy, key } of keys) fields.push(keyBlockField(policy, await boundedKey(key)));
    const written = await writePlan(ctx.store, {
      hash: plansKey(ctx.prefix),
      field: fields,
      value: block ? "0" : null,
      ttlMs: block && seconds !== undefined ? seconds * 1000 : 0,
      max: MAX_PLAN_ENTRIES,
      maxBytes: MAX_PLAN_BYTES,
      ...clockOf(),
    });
    return planAnswer(written);
  }

  async function changeNetwork(
    target: NetworkBlock,
    block: boolean,
    seconds: number | undefined,
  ): Promise<NetworkChange> {
    const by = networkIssue(target);
    if (by) return by;
    const normalized = networkValue(target.by, target.value);
    if (!normalized.ok) return { ok: false, field: target.by, detail: normalized.detail };
    const { value } = normalized;
    const issue = policyIssue(target.policy) ?? (block ? secondsIssue(seconds) : undefined);
    if (issue) return issue;
    try {
      const written = await writePlan(ctx.store, {
        hash: networkBlocksKey(ctx.prefix),
        field: networkBlockField(target.by, value, target.policy),
        value: block ? "0" : null,
        ...(block ? { ttlMs: seconds === undefined ? 0 : seconds * 1000 } : {}),
        max: MAX_NETWORK_BLOCKS,
        ...clockOf(),
      });
      if (block && written.full) return full(MAX_NETWORK_BLOCKS, "network blocks");
      return { ok: true, existed: written.existed, value };
    } finally {
      networkChanged();
    }
  }

  return {
    overrides: {
      set: (policy, key, override) =>
        setOverride(
          { policy, key },
          override?.limit ?? Number.NaN,
          override?.algorithm,
          override?.anchor,
          override?.usage === true,
        ),
      remove: (policy, key) => setOverride({ policy, key }, null, undefined),
    },
    blocks: {
      add: (keys, options) => changeKeyBlocks(keys, true, options?.seconds),
      remove: (keys) => changeKeyBlocks(keys, false, undefined),
    },
    networks: {
      add: (block) => changeNetwork(block, true, block?.seconds),
      remove: (block) => changeNetwork(block, false, undefined),
    },
  };
}

/** One key's override and key block in one policy, as the decision script would read them now. */
export async function planOf(ctx: LimiterContext, target: PlanKey): Promise<KeyPlan> {
  return readPlan(ctx.store, ctx.prefix, target.policy, await boundedKey(target.key), {
    clock: ctx.clock.source,
  });
}

function targetIssue(target: PlanKey): PlanChange | undefined {
  const issue = policyIssue(target?.policy);
  if (issue) return issue;
  if (typeof target.key !== "string" || target.key.length === 0) {
    return { ok: false, field: "key", detail: "must be a non-empty string" };
  }
  return undefined;
}

function networkIssue(target: NetworkBlock): PlanRefusal | undefined {
  if (target?.by !== "ip" && target?.by !== "country" && target?.by !== "asn") {
    return { ok: false, field: "by", detail: 'must be "ip", "country" or "asn"' };
  }
  return undefined;
}

function policyIssue(policy: string | undefined): PlanRefusal | undefined {
  if (policy !== undefined && (typeof policy !== "string" || !POLICY_NAME.test(policy))) {
    return { ok: false, field: "rule", detail: "must be 1 to 64 of A-Z a-z 0-9 _ . -" };
  }
  return undefined;
}

function secondsIssue(seconds: number | undefined): PlanRefusal | undefined {
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

function full(max: number, what: string): PlanRefusal {
  return {
    ok: false,
    field: "body",
    detail: `the store holds ${max} ${what} already, the most it takes: remove some first`,
  };
}
