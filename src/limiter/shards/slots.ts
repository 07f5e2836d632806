/**
 * A sharded limiter's concurrency slots (docs/shards.md, docs/concurrency.md): each release to
 * the shard that holds the slot, and the in-flight counts of every shard added up.
 */
import { isDigestedKey } from "../../bounded-key";
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
      // instant still is. A key in a digest's form may be a long key as counted (a decision's
      // slot's key, which no placement can tell the shard of): every shard is asked, in turn.
      // Ids are unique, so each next shard is asked only for the slots the ones before did not hold.
      const candidates: Shard[][] = slots.map((slot) => {
        const named = slot?.shard === undefined ? undefined : shards.byName.get(slot.shard);
        if (named) return [named];
        const key = slot?.key;
        const { to, from } =
          typeof key === "string" ? router.route(key, t) : { to: 0, from: undefined };
        const placed = [to, ...(from === undefined ? [] : [from])];
        if (typeof key === "string" && isDigestedKey(key)) {
          shards.list.forEach((_, i) => {
            if (!placed.includes(i)) placed.push(i);
          });
        }
        return placed.map((i) => shards.list[i] as Shard);
      });
      const released: boolean[] = new Array(slots.length).fill(false);
      const errors: string[] = [];
      let retrying = false;
      for (let pass = 0; ; pass++) {
        const on = candidates.map((list, i) => (released[i] ? undefined : list[pass]));
        if (!on.some((shard) => shard !== undefined)) break;
        const outcome = await releaseOn(slots, on, releaseOptions);
        if (outcome.error !== undefined) errors.push(outcome.error);
        if (outcome.retrying) retrying = true;
        // Not answered: which shard holds the rest is unknown, and asking on could not tell.
        if (outcome.released.length === 0) {
          if (pass === 0) return outcome;
          break;
        }
        outcome.released.forEach((done, i) => {
          if (done) released[i] = true;
        });
      }
      const outcome: ReleaseOutcome = { released };
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
