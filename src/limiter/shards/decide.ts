/**
 * A sharded limiter's decision (docs/shards.md): each request to the shard its key lives on
 * (router.ts), a call whose keys live on several shards decided on each in parallel, all or
 * nothing (a part admitted where another denied is refunded), and a moved key's requests
 * adjusted for its transition (transition.ts).
 */
import { boundedKey, needsDigest } from "../../bounded-key";
import { DEFAULT_LIMITER_TIMEOUT_MS } from "../defaults";
import type { LimiterOptions } from "../limiter-options";
import type { PlacedCallOptions } from "../placement-refusal";
import { resolvePolicies } from "../resolved-policy";
import type {
  ConcurrencySlot,
  Decision,
  LimitAllOptions,
  LimitRequest,
  MultiDecision,
} from "../types";
import { cachedDenial } from "./cached-denial";
import type { ShardFence } from "./fence";
import { mergeParts, type ShardPart, tagShard } from "./merge";
import { blockedSinceRecord, replayOnOld } from "./old-replay";
import { asReplay, replaysAdmission } from "./replay";
import type { Router } from "./router";
import type { Shard, Shards } from "./shard";
import type { Transition } from "./transition";

/** The requests of one call that one shard decides. */
interface Group {
  shard: number;
  indices: number[];
  /** Per request: the shard it moved from, while its policy's transition lasts. */
  from: (number | undefined)[];
}

export type LimitAll = (
  given: readonly LimitRequest[],
  limitOptions?: LimitAllOptions,
) => Promise<MultiDecision>;

export function createShardedDecide(
  options: LimiterOptions,
  shards: Shards,
  router: Router,
  transition: Transition,
  fence: ShardFence,
): LimitAll {
  const now = options.now ?? Date.now;
  const { onDecision } = options;

  function report(requests: readonly LimitRequest[], decided: MultiDecision): MultiDecision {
    if (onDecision) {
      try {
        onDecision(requests, decided);
      } catch {
        // A metrics hook must never turn a decision into an error.
      }
    }
    return decided;
  }

  async function limitAll(
    given: readonly LimitRequest[],
    limitOptions: LimitAllOptions = {},
  ): Promise<MultiDecision> {
    const t = now();
    fence.announce(t, limitOptions.waitUntil);
    // Every shard's call carries the placement this one's keys were placed by (fence.ts).
    const placed: PlacedCallOptions = { ...limitOptions, fence: fence.view(t) };
    // Nothing the router can place (not a list, a key that is not a string): the first shard
    // answers it as one store does (PolicyBoundsError; an empty list is admitted).
    if (!Array.isArray(given) || given.some((request) => typeof request?.key !== "string")) {
      return report(given, await (shards.list[0] as Shard).limiter.limitAll(given, limitOptions));
    }
    const groups = new Map<number, Group>();
    let moved = false;
    // Where each key lived before the instant (its shard now, unless a transition moved it).
    const olds = new Set<number>();
    given.forEach((request, i) => {
      const { to, from } = router.route(request.key, t);
      olds.add(from ?? to);
      let group = groups.get(to);
      if (!group) {
        group = { shard: to, indices: [], from: [] };
        groups.set(to, group);
      }
      const moving = router.movedFrom(request.key, request.windowMs as number, t);
      if (moving !== undefined) moved = true;
      group.indices.push(i);
      group.from.push(moving);
    });
    if (groups.size <= 1 && !moved) {
      // One shard, nothing moved: its limiter decides the call as it is (no added cost).
      const [group] = groups.values();
      const shard = shards.list[group?.shard ?? 0] as Shard;
      return report(given, tagShard(await shard.limiter.limitAll(given, placed), shard.name));
    }
    // Checked whole first, so that a field out of bounds is named by its index in `given`.
    // The keys as counted (digested past MAX_KEY_LENGTH) are for the old shard's peeks only:
    // the shards' limiters and the plan reads take the keys as given (they digest them).
    const counted = given.some((request) => needsDigest(request.key))
      ? await Promise.all(given.map((request) => boundedKey(request.key)))
      : given.map((request) => request.key);
    const policies = resolvePolicies(
      "limit",
      given.map((request, i) => ({ ...request, key: counted[i] as string })),
      options.failMode ?? "open",
    );
    const { requestId } = limitOptions;
    if (moved && requestId !== undefined && olds.size === 1) {
      // A retry of a request the old shard admitted before the instant: replayed from its
      // record there (old-replay.ts), not decided afresh and counted twice. That shard not
      // answering: the call goes to its failure policy, as its moved keys' would after a
      // second deadline, its slots named there.
      const old = shards.list[[...olds][0] as number] as Shard;
      const failMode = options.failMode ?? "open";
      const replayed = await replayOnOld(old, given, counted, requestId, failMode);
      // (In the settle interval the call is denied below, asking no shard: as without an id.)
      if (replayed === "failed" && t >= router.settledAt) {
        const decided = shards.degradedOn(old)(policies);
        for (const slot of decided.slots ?? []) slot.shard = old.name;
        return report(given, tagShard(decided, old.name));
      }
      const placedOn = (request: LimitRequest) =>
        shards.list[router.route(request.key, t).to] as Shard;
      const timeoutMs = options.timeoutMs ?? DEFAULT_LIMITER_TIMEOUT_MS;
      if (
        replayed &&
        replayed !== "failed" &&
        !(await blockedSinceRecord(given, placedOn, old, timeoutMs, limitOptions))
      ) {
        return report(given, replayed);
      }
    }
    // One policy known to deny denies the whole before any part reaches a store.
    const cached = cachedDenial(shards.denialCache, policies, limitOptions.requestId, now());
    if (cached) {
      for (const group of groups.values()) {
        const name = (shards.list[group.shard] as Shard).name;
        for (const index of group.indices) (cached.decisions[index] as Decision).shard = name;
      }
      return report(given, cached);
    }
    const parts = await Promise.all(
      [...groups.values()].map((group) => decideGroup(group, given, counted, placed, t)),
    );
    // A retry: one part that replays an admission proves the whole was admitted (replay.ts).
    if (limitOptions.requestId !== undefined && replaysAdmission(parts)) {
      await asReplay(parts, shards, limitOptions);
      return report(given, mergeParts(given.length, parts, limitOptions.requestId));
    }
    if (parts.some((part) => !part.decided.allowed)) {
      // All or nothing: what the other shards admitted is given back (held one round trip at
      // worst). A refund with the request id deletes that part's record, so a retry is decided
      // afresh there rather than replayed as admitted.
      await Promise.all(
        parts.map(async (part) => {
          const receipt = part.decided.allowed ? part.decided.receipt : undefined;
          if (!receipt) return;
          const shard = shards.byName.get(part.shard) as Shard;
          const outcome = await shard.limiter.refund(receipt);
          part.refunded = outcome.refunded;
          if (outcome.refunded) delete part.decided.receipt;
        }),
      );
      // A part admitted with concurrency slots gives them back too: the request holds none.
      // Each where it was taken: a slot that names a shard (a fallback slot in a failed old
      // shard's local store) there, the others on the part's shard.
      const held = new Map<string, ConcurrencySlot[]>();
      for (const part of parts) {
        const slots = part.decided.allowed ? part.decided.slots : undefined;
        if (!slots || slots.length === 0) continue;
        delete part.decided.slots;
        for (const slot of slots) {
          const list = held.get(slot.shard ?? part.shard) ?? [];
          list.push(slot);
          held.set(slot.shard ?? part.shard, list);
        }
      }
      await Promise.all(
        [...held].map(([name, slots]) =>
          (shards.byName.get(name) as Shard).limiter.release(slots, limitOptions),
        ),
      );
    }
    return report(given, mergeParts(given.length, parts, limitOptions.requestId));
  }

  /** One shard's share of a call: as it is, or, for keys moved in a transition, adjusted. */
  async function decideGroup(
    group: Group,
    requests: readonly LimitRequest[],
    counted: readonly string[],
    limitOptions: PlacedCallOptions,
    t: number,
  ): Promise<ShardPart> {
    const shard = shards.list[group.shard] as Shard;
    const own = group.indices.map((index) => requests[index] as LimitRequest);
    const part = (decided: MultiDecision, asked: readonly LimitRequest[] = own): ShardPart => ({
      shard: shard.name,
      indices: group.indices,
      requests: asked,
      decided,
    });
    if (group.from.every((from) => from === undefined)) {
      return part(await shard.limiter.limitAll(own, limitOptions));
    }
    const keys = group.indices.map((index) => counted[index] as string);
    const adjusted = await transition.adjustMoved(shard, own, keys, group.from, t, limitOptions);
    if ("decided" in adjusted) return part(adjusted.decided);
    const decided = await shard.limiter.limitAll(adjusted.requests, limitOptions);
    // The real limit, not the one reduced by the old shard's count (remaining is exact).
    decided.decisions.forEach((decision, j) => {
      const limit = adjusted.limits[j];
      if (limit !== undefined) decision.limit = limit;
    });
    return part(decided, adjusted.requests);
  }

  return limitAll;
}
