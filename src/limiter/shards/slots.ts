/**
 * A sharded limiter's concurrency slots (docs/shards.md, docs/concurrency.md): each release to
 * the shard that holds the slot, and the in-flight counts of every shard added up.
 */
import type { Limiter } from "../limiter-api";
import type { ReleaseInput } from "../release-slots";
import type { ReleaseOutcome } from "../types";
import type { Router } from "./router";
import type { Shard, Shards } from "./shard";

export type ShardedSlots = Pick<Limiter, "release" | "inFlight">;

export function createShardedSlots(
  shards: Shards,
  router: Router,
  now: () => number,
): ShardedSlots {
  return {
    async release(given, releaseOptions) {
      // Each slot to the shard that holds it: named on the slot a decision handed out, else
      // (a slot id given back by hand, as /check/release takes it) the key's shard now.
      const slots: readonly ReleaseInput[] = Array.isArray(given) ? given : [given as ReleaseInput];
      const t = now();
      const byShard = new Map<Shard, number[]>();
      for (const [i, slot] of slots.entries()) {
        const named = slot.shard === undefined ? undefined : shards.byName.get(slot.shard);
        const shard = named ?? (shards.list[router.route(slot.key, t).to] as Shard);
        const indices = byShard.get(shard) ?? [];
        indices.push(i);
        byShard.set(shard, indices);
      }
      const released: boolean[] = new Array(slots.length).fill(false);
      const errors: string[] = [];
      let retrying = false;
      let answered = true;
      await Promise.all(
        [...byShard].map(async ([shard, indices]) => {
          const outcome = await shard.limiter.release(
            indices.map((i) => slots[i] as ReleaseInput),
            releaseOptions,
          );
          if (outcome.error !== undefined) errors.push(`${shard.name}: ${outcome.error}`);
          if (outcome.retrying) retrying = true;
          if (outcome.released.length === 0) answered = false;
          outcome.released.forEach((done, j) => {
            released[indices[j] as number] = done;
          });
        }),
      );
      const outcome: ReleaseOutcome = { released: answered ? released : [] };
      if (errors.length > 0) outcome.error = errors.join("; ");
      if (retrying) outcome.retrying = true;
      return outcome;
    },

    async inFlight(policies) {
      // Every shard holds the slots of its keys: the counts add up.
      const counts = await Promise.all(
        shards.list.map((shard) => shard.limiter.inFlight(policies)),
      );
      return policies.map((policy) => {
        const total = { policy, inFlight: 0, keys: 0, complete: true };
        for (const list of counts) {
          const count = list.find((entry) => entry.policy === policy);
          if (!count) continue;
          total.inFlight += count.inFlight;
          total.keys += count.keys;
          total.complete &&= count.complete;
        }
        return total;
      });
    },
  };
}
