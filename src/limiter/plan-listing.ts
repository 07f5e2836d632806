/**
 * The plans as listed (docs/plans.md, `limiter.plans.list`, `GET /check/plans`): one page of
 * overrides, key blocks or network blocks at a time, bounded by the store's page and ended blocks
 * left out. Changing them is plan-changes.ts.
 */

import { readOverride } from "../store/override-value";
import { listPlans } from "../store/plan-reads";
import { type NetworkBlockKind, networkBlocksKey, plansKey } from "../store/plans";
import type { LimiterContext } from "./context";

/** One listed plan: an override, a key block or a network block. */
export interface PlanEntry {
  type: "override" | "block";
  /** "key" for overrides and key blocks. */
  by: "key" | NetworkBlockKind;
  /** The policy; undefined: every rule (network blocks only). */
  policy?: string;
  /** The client key as counted (hashed, grouped), or the network value. */
  value: string;
  /** An override's limit. */
  limit?: number;
  /** An override's own anchor for a calendar quota (Unix ms): its periods start there. */
  anchor?: number;
  /** A block's end (unix ms, the store's clock); absent: until removed. */
  until?: number;
  /**
   * The shard it is stored on, when the limiter has shards (docs/shards.md): a key's plan
   * lives with the key, and during a reshard a changed plan is written to both placements.
   */
  shard?: string;
}

/** Most entries one listing page asks the store for (HSCAN COUNT). */
const MAX_LIST_COUNT = 1_000;

/** What `limiter.plans.list` lists, and from where. */
export interface PlanListing {
  /** "overrides", "blocks" (key blocks) or "network" (network blocks). */
  what: "overrides" | "blocks" | "network";
  /**
   * "0" starts; the page's cursor continues. With shards, overrides and key blocks are listed
   * shard after shard, and the cursor says which (`<shard index>:<cursor>`). @default "0"
   */
  cursor?: string | undefined;
  /** Entries the store is asked for (1 to MAX_LIST_COUNT): a page may hold fewer. @default 100 */
  count?: number | undefined;
  /** One policy's entries only. @default every policy */
  policy?: string | undefined;
}

/** One page of plans; its `cursor` "0" ends the listing. */
export interface PlanPage {
  cursor: string;
  entries: PlanEntry[];
}

/** `limiter.plans`. */
export interface Plans {
  /**
   * One page of the plans, ended blocks left out. Rejects on a store failure (a bad cursor or
   * count is the store's error too: give the cursor a page answered).
   */
  list(listing: PlanListing): Promise<PlanPage>;
}

export function createPlanListing(ctx: LimiterContext): Plans {
  return {
    async list(listing) {
      const network = listing.what === "network";
      const hash = network ? networkBlocksKey(ctx.prefix) : plansKey(ctx.prefix);
      // Policy names hold no glob characters (POLICY_NAME): a pattern of them matches literally.
      const policy = listing.policy ?? "*";
      const pattern = network
        ? `*|${policy}|*`
        : `${listing.what === "overrides" ? "o" : "b"}|${policy}|*`;
      const page = await listPlans(
        ctx.store,
        hash,
        listing.cursor ?? "0",
        pattern,
        // Bounded whatever the caller asks: one page is at most MAX_LIST_COUNT entries.
        Math.min(Math.max(1, Math.trunc(listing.count ?? 100) || 1), MAX_LIST_COUNT),
        { clock: ctx.clock.source },
      );
      return { cursor: page.cursor, entries: page.entries.map(entryOf) };
    },
  };
}

function entryOf({ field, value }: { field: string; value: string }): PlanEntry {
  const first = field.indexOf("|");
  const second = field.indexOf("|", first + 1);
  const kind = field.slice(0, first);
  const name = field.slice(first + 1, second);
  const rest = field.slice(second + 1);
  const number = Number(value);
  if (kind === "o") {
    return {
      type: "override",
      by: "key",
      policy: name,
      value: decode(rest),
      ...readOverride(value),
    };
  }
  const entry: PlanEntry = {
    type: "block",
    by: kind === "b" ? "key" : (kind as NetworkBlockKind),
    value: kind === "b" ? decode(rest) : rest,
  };
  if (name !== "*") entry.policy = name;
  if (number > 0) entry.until = number;
  return entry;
}

function decode(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}
