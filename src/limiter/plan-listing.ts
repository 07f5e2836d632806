/**
 * The plans as listed (docs/plans.md, `GET /check/plans`): one page of overrides, key blocks or
 * network blocks at a time, bounded by the store's page and ended blocks left out. Changing them
 * is plan-changes.ts.
 */
import { listPlans, type NetworkBlockKind, networkBlocksKey, plansKey } from "../store/plans";
import type { ScriptClient } from "../store/script-runner";
import type { ClockSource } from "../store/store-clock";
import { DEFAULT_PREFIX } from "./defaults";

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
  /** A block's end (unix ms, the store's clock); absent: until removed. */
  until?: number;
}

/** Most entries one listing page asks the store for (HSCAN COUNT). */
export const MAX_LIST_COUNT = 1_000;

/**
 * One page of the plans (`what` "overrides", "blocks" for key blocks, "network"), ended blocks
 * left out. `cursor` "0" starts; the answer's "0" ends.
 */
export async function listPlanEntries(
  store: ScriptClient,
  options: {
    prefix?: string | undefined;
    what: "overrides" | "blocks" | "network";
    cursor: string;
    count: number;
    policy?: string | undefined;
    clock?: ClockSource | undefined;
  },
): Promise<{ cursor: string; entries: PlanEntry[] }> {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const network = options.what === "network";
  const hash = network ? networkBlocksKey(prefix) : plansKey(prefix);
  // Policy names hold no glob characters (POLICY_NAME): a pattern of them matches literally.
  const policy = options.policy ?? "*";
  const pattern = network
    ? `*|${policy}|*`
    : `${options.what === "overrides" ? "o" : "b"}|${policy}|*`;
  const page = await listPlans(store, hash, options.cursor, pattern, options.count, {
    clock: options.clock,
  });
  const entries: PlanEntry[] = [];
  for (const { field, value } of page.entries) {
    const first = field.indexOf("|");
    const second = field.indexOf("|", first + 1);
    const kind = field.slice(0, first);
    const name = field.slice(first + 1, second);
    const rest = field.slice(second + 1);
    const number = Number(value);
    if (kind === "o") {
      entries.push({
        type: "override",
        by: "key",
        policy: name,
        value: decode(rest),
        limit: number,
      });
      continue;
    }
    const entry: PlanEntry = {
      type: "block",
      by: kind === "b" ? "key" : (kind as NetworkBlockKind),
      value: kind === "b" ? decode(rest) : rest,
    };
    if (name !== "*") entry.policy = name;
    if (number > 0) entry.until = number;
    entries.push(entry);
  }
  return { cursor: page.cursor, entries };
}

function decode(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}
