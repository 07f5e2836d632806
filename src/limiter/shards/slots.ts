/**
 * A sharded limiter's concurrency slots (docs/shards.md, docs/concurrency.md): each release to
 * the shard that holds the slot, and the in-flight counts of every shard added up.
 */
import type { Limiter } from "../limiter-api";
import type { ReleaseInput, ReleaseOptions } from "../release-slots";
import type { ReleaseOutcome } from "../types";
import type { Router } from "./router";
import type { Shard, Shards } from "./shard";

export type ShardedSlots = Pick<Limiter, "release" | "inFlight">;

/** Gives each slot back on its shard (none: not asked, answered false), one call per shard. */
async function releaseOn(
  slots: readonly ReleaseInput[],
  on: readonly (Shard | undefined)[],
  releaseOptions: ReleaseOptions | undefined,
): Promise<ReleaseOutcome> {
  const byShard = new Map<Shard, number[]>();
  on.forEach((shard, i) => {
    if (!shard) return;
    const indices = byShard.get(shard) ?? [];
    indices.push(i);
    byShard.set(shard, indices);
  });
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
}

export function createShardedSlots(
  shards: Shards,
  router: Router,
  now: () => number,
): ShardedSlots {
  return {
    async release(given, releaseOptions) {
      const slots: readonly ReleaseInput[] = Array.isArray(given) ? given : [given as ReleaseInput];
      const t = now();
      // Each slot to the shard that holds it: named on the slot a decision handed out, else (a
      // slot id given back by hand, as /check/release takes it) the key's shard now and, while
      // a reshard's transition lasts, the one it lived on before, where a slot taken before the
      // instant still is. Ids are unique, so the second is asked only for the slots the first
      // did not hold.
      const firsts: (Shard | undefined)[] = [];
      const seconds: (Shard | undefined)[] = [];
      for (const slot of slots) {
        const named = slot.shard === undefined ? undefined : shards.byName.get(slot.shard);
        if (named) {
          firsts.push(named);
          seconds.push(undefined);
          continue;
        }
        const { to, from } =
          typeof slot?.key === "string" ? router.route(slot.key, t) : { to: 0, from: undefined };
        firsts.push(shards.list[to]);
        seconds.push(from === undefined ? undefined : shards.list[from]);
      }
      const first = await releaseOn(slots, firsts, releaseOptions);
      const missed = first.released.map((done, i) => !done && seconds[i] !== undefined);
      if (first.released.length === 0 || !missed.some(Boolean)) return first;
      const second = await releaseOn(
        slots,
        seconds.map((shard, i) => (missed[i] ? shard : undefined)),
        releaseOptions,
      );
      const outcome: ReleaseOutcome = {
        released: first.released.map((done, i) => done || (second.released[i] ?? false)),
      };
      const errors = [first.error, second.error].filter((error) => error !== undefined);
      if (errors.length > 0) outcome.error = errors.join("; ");
      if (first.retrying || second.retrying) outcome.retrying = true;
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
