/**
 * A sharded limiter's plans (docs/shards.md): an override or key block lives with its key, on
 * the key's shard, where the decision script reads it atomically with the count. While a
 * reshard is configured a change is written to both of the key's placements (the one before
 * and the one after), so that it holds whichever decides the key. The listing walks every
 * shard; network blocks, per deployment, live on the first shard.
 */
import type { Limiter } from "../limiter-api";
import type { KeyBlocksAdmin, Overrides, PlanChange, PlanKey } from "../plan-changes";
import type { Plans } from "../plan-listing";

export interface ShardedPlansOptions {
  names: readonly string[];
  limiters: readonly Limiter[];
  /** The shards (indices) a change of `key`'s plans goes to now: its placement(s). */
  targets(key: unknown): readonly number[];
}

/** Several shards' answers to one change as one: refused if any refused, else made. */
function together(changes: readonly PlanChange[]): PlanChange {
  const refused = changes.find((change) => !change.ok);
  if (refused) return refused;
  return { ok: true, existed: changes.some((change) => change.ok && change.existed) };
}

export function createShardedPlans(options: ShardedPlansOptions): {
  overrides: Overrides;
  blocks: KeyBlocksAdmin;
  plans: Plans;
} {
  const { names, limiters, targets } = options;
  const at = (index: number) => limiters[index] as Limiter;
  const onTargets = async (key: unknown, change: (limiter: Limiter) => Promise<PlanChange>) =>
    together(await Promise.all(targets(key).map((index) => change(at(index)))));
  async function keyBlocks(
    given: PlanKey | readonly PlanKey[],
    change: (limiter: Limiter, keys: PlanKey[]) => Promise<PlanChange>,
  ): Promise<PlanChange> {
    const keys: readonly PlanKey[] = Array.isArray(given) ? given : [given as PlanKey];
    // Nothing to place (an empty list, a malformed key): the first shard refuses it as one store does.
    if (keys.length === 0 || keys.some((target) => typeof target?.key !== "string")) {
      return change(at(0), keys as PlanKey[]);
    }
    const byShard = new Map<number, PlanKey[]>();
    for (const target of keys) {
      for (const index of targets(target.key)) {
        const list = byShard.get(index) ?? [];
        list.push(target);
        byShard.set(index, list);
      }
    }
    return together(
      await Promise.all([...byShard].map(([index, list]) => change(at(index), list))),
    );
  }
  return {
    overrides: {
      set: (policy, key, override) => onTargets(key, (l) => l.overrides.set(policy, key, override)),
      remove: (policy, key) => onTargets(key, (l) => l.overrides.remove(policy, key)),
    },
    blocks: {
      add: (keys, blockOptions) => keyBlocks(keys, (l, list) => l.blocks.add(list, blockOptions)),
      remove: (keys) => keyBlocks(keys, (l, list) => l.blocks.remove(list)),
    },
    plans: {
      async list(listing) {
        if (listing?.what === "network") {
          const page = await at(0).plans.list(listing);
          for (const entry of page.entries) entry.shard = names[0] as string;
          return page;
        }
        // `<shard index>:<cursor>`; "0" starts at the first shard.
        const cursor = listing?.cursor ?? "0";
        const split = cursor.indexOf(":");
        const index = split < 0 ? 0 : Number(cursor.slice(0, split));
        const inner = split < 0 ? cursor : cursor.slice(split + 1);
        if (!Number.isInteger(index) || index < 0 || index >= limiters.length) {
          // Not a cursor a page answered: the store's answer to a bad cursor.
          return at(0).plans.list({ ...listing, cursor: "x" });
        }
        const page = await at(index).plans.list({ ...listing, cursor: inner });
        for (const entry of page.entries) entry.shard = names[index] as string;
        const next =
          page.cursor !== "0"
            ? `${index}:${page.cursor}`
            : index + 1 < limiters.length
              ? `${index + 1}:0`
              : "0";
        return { cursor: next, entries: page.entries };
      },
    },
  };
}
