/**
 * A limiter over several stores (docs/shards.md): one store limiter per shard (its own store,
 * breaker, clock policy, leases), all sharing one denial cache and one fallback limiter, behind
 * a router. Each client key lives on one shard (shard-placement.ts), so every rule of one key is
 * still one atomic script; a request whose rules' keys live on several shards is decided on
 * each in parallel, all or nothing (a part admitted where another denied is refunded).
 *
 * The reshard, and why it stays exact. Options name the shards before (`reshard.from`) and the
 * instant `at`. Write Δ for the limiter's timeoutMs (a store answer later than Δ is never used:
 * the decision has gone to its failure policy) and A for STAMP_AHEAD_MAX_MS (the furthest
 * ahead a lease stamps its units). For a key whose shard changes (old O, new N):
 *
 * 1. Before `at` (isolate clock) it is decided on O, as before.
 * 2. In [at, at + Δ) it is denied (retry at at + Δ), counting nothing anywhere. Every isolate
 *    runs these options before `at` (the deployment's premise), so every call deciding the key
 *    on O was sent before `at`, and any whose answer was used ran on O before at + Δ. After
 *    at + Δ, O admits nothing more for the key: its live count u_O only falls from then on.
 * 3. From at + Δ until at + Δ + A + w (w: the policy's window), a sliding-log policy is decided
 *    on N with the limit L - u, where u is u_O read by a peek of O (moved-key-counts.ts) sent
 *    after at + Δ. Since u_O only falls, u ≥ u_O at the decision, and N admits a cost c only
 *    when n_N + c ≤ L - u, so n_N + u_O + c ≤ L: the key's two logs together, which are all of
 *    its admissions in the window, never pass L. The decision reports the real limit L;
 *    `remaining` (L - u - n_N - c) is exact while u is. Leases and regions are off for the key
 *    (only N's store decides it), and its override and block are read by the router
 *    (N's, else O's, copied to N), since the script would read them in place of L - u.
 * 4. After at + Δ + A + w every admission O holds for the key was stamped before at + Δ + A, so
 *    it has left the window: u_O = 0 and O is forgotten for that policy.
 *
 * Costs: the peek (one read-only script) only for moved keys in the transition, once per key
 * and policy until the next of u's units leaves the window (u = 0: once). The other algorithms
 * (O(1) counters, not logs: nothing to peek) start afresh on N at at + Δ: one window in which a
 * moved key may get its limit once more, the slack fixed-window already has at a boundary.
 */
import { boundedKey, needsDigest } from "../bounded-key";
import { isLogAlgorithm } from "../store/algorithm";
import { MAX_WINDOW_MS } from "../store/caps";
import { STAMP_AHEAD_MAX_MS } from "../store/keys";
import { withDeadline } from "../store/with-deadline";
import type { BreakerEvent } from "./circuit-breaker";
import type { LimiterContext } from "./context";
import { blockedRequest, denied, fromCache, notAsked } from "./decisions";
import { DEFAULT_LIMITER_TIMEOUT_MS } from "./defaults";
import { createDegradedPath } from "./degraded";
import { createDenialCache } from "./denial-cache";
import { createFallbackLimiter } from "./fallback-limiter";
import type { Limiter } from "./limiter-api";
import type { LimiterOptions, StoreLimiterOptions } from "./limiter-options";
import { createMovedKeyCounts } from "./moved-key-counts";
import { planOf } from "./plan-changes";
import type { CountedReceipt } from "./receipt-state";
import type { ReleaseInput } from "./release-slots";
import { type ResolvedPolicy, resolvePolicies } from "./resolved-policy";
import { mergeParts, type ShardPart, tagShard } from "./shard-merge";
import type { ShardLayout } from "./shard-options";
import { createPlacement } from "./shard-placement";
import { createShardedPlans } from "./shard-plans";
import { refundParts } from "./shard-refund";
import type { ShardPlacement } from "./shard-types";
import type { LimitAllOptions, LimitRequest, MultiDecision, ReleaseOutcome } from "./types";

/** A shard's breaker probes again within this (ms) after it opened, so a recovered shard's keys
 * are decided by Redis again soon (its cool-down doubles up to this, not to 30 s). */
export const SHARD_MAX_COOLDOWN_MS = 1_500;

/** One shard's limiter and context, as buildStoreLimiter makes them. */
type BuildStoreLimiter = (options: StoreLimiterOptions) => {
  limiter: Limiter;
  ctx: LimiterContext;
};

interface Shard {
  name: string;
  limiter: Limiter;
  ctx: LimiterContext;
}

/** The requests of one call that one shard decides. */
interface Group {
  shard: number;
  indices: number[];
  /** Per request: the shard it moved from, while its policy's transition lasts. */
  from: (number | undefined)[];
}

export function createShardedLimiter(
  options: LimiterOptions,
  layout: ShardLayout,
  build: BuildStoreLimiter,
): Limiter {
  const now = options.now ?? Date.now;
  const timeoutMs = options.timeoutMs ?? DEFAULT_LIMITER_TIMEOUT_MS;
  // One denial cache and one fallback for every shard: a key's entries are its own whichever
  // shard decided it, and their budgets are the isolate's.
  const cacheOption = options.denialCache ?? {};
  const denialCache =
    cacheOption === false
      ? false
      : "lookup" in cacheOption
        ? cacheOption
        : createDenialCache(cacheOption);
  const fallbackOption = options.fallback ?? {};
  const fallback =
    fallbackOption === false
      ? false
      : {
          ...fallbackOption,
          limiter: fallbackOption.limiter ?? createFallbackLimiter(fallbackOption),
        };
  const { store: _store, reshard: _reshard, onDecision, ...common } = options;
  const { onBreakerChange } = common;
  // A sick shard stops only its own keys, and its keys return to Redis only when a probe finds
  // it answering: a cool-down that doubles to 30 s would keep them on the fallback that long
  // after it recovered. Each shard's is capped, as a region store's is; a probe costs one
  // request per isolate a timeout at most, on that shard's keys alone.
  const cooldownMs = Math.min(common.breaker?.cooldownMs ?? 1_000, SHARD_MAX_COOLDOWN_MS);
  const breaker = {
    ...common.breaker,
    cooldownMs,
    maxCooldownMs: Math.max(
      cooldownMs,
      Math.min(common.breaker?.maxCooldownMs ?? 30_000, SHARD_MAX_COOLDOWN_MS),
    ),
  };
  const shards: Shard[] = layout.clients.map((client, i) => {
    const name = layout.names[i] as string;
    return {
      name,
      ...build({
        ...common,
        store: client,
        denialCache,
        fallback,
        breaker,
        // Each shard's breaker says whose it is: one shard down is not the store down.
        ...(onBreakerChange
          ? { onBreakerChange: (event: BreakerEvent) => onBreakerChange({ ...event, shard: name }) }
          : {}),
      }),
    };
  });
  const byName = new Map(shards.map((shard) => [shard.name, shard]));
  const current = createPlacement(layout.names.slice(0, layout.placed));
  const reshard = layout.reshard;
  const previous = reshard && createPlacement(reshard.from);
  const previousIndex = reshard?.from.map((name) => layout.names.indexOf(name)) ?? [];
  const at = reshard?.at ?? 0;
  const settledAt = at + timeoutMs;
  const endsBy = settledAt + STAMP_AHEAD_MAX_MS + MAX_WINDOW_MS;
  const counts = createMovedKeyCounts(now);
  const degradedOn = (shard: Shard) =>
    createDegradedPath({
      now,
      fallback: fallback === false ? undefined : fallback.limiter,
      fallbackFraction: fallback === false ? 0 : (fallback.fraction ?? 1),
      breaker: shard.ctx.breaker,
      localSlots: shard.ctx.localSlots,
    });

  /** The shard deciding `key` at `t`, and the one it moved from while a transition may last. */
  function route(key: string, t: number): { to: number; from: number | undefined } {
    if (!previous) return { to: current.of(key), from: undefined };
    if (t < at) return { to: previousIndex[previous.of(key)] as number, from: undefined };
    const to = current.of(key);
    if (t >= endsBy) return { to, from: undefined };
    const from = previousIndex[previous.of(key)] as number;
    return { to, from: from === to ? undefined : from };
  }
  /** The end of a moved policy's transition (step 4). */
  const transitionEnd = (request: LimitRequest) =>
    settledAt + STAMP_AHEAD_MAX_MS + (request.windowMs as number);

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
    // Nothing the router can place (not a list, a key that is not a string): the first shard
    // answers it as one store does (PolicyBoundsError; an empty list is admitted).
    if (!Array.isArray(given) || given.some((request) => typeof request?.key !== "string")) {
      return report(given, await (shards[0] as Shard).limiter.limitAll(given, limitOptions));
    }
    const groups = new Map<number, Group>();
    let moved = false;
    given.forEach((request, i) => {
      const { to, from } = route(request.key, t);
      let group = groups.get(to);
      if (!group) {
        group = { shard: to, indices: [], from: [] };
        groups.set(to, group);
      }
      const moving = from !== undefined && t < transitionEnd(request) ? from : undefined;
      if (moving !== undefined) moved = true;
      group.indices.push(i);
      group.from.push(moving);
    });
    if (groups.size <= 1 && !moved) {
      // One shard, nothing moved: its limiter decides the call as it is (no added cost).
      const [group] = groups.values();
      const shard = shards[group?.shard ?? 0] as Shard;
      return report(given, tagShard(await shard.limiter.limitAll(given, limitOptions), shard.name));
    }
    // Checked whole first, so that a field out of bounds is named by its index in `given`.
    // The keys as counted (digested past MAX_KEY_LENGTH) are for the old shard's peeks only:
    // the shards' limiters and the plan reads take the keys as given (they digest them).
    const counted = given.some((request) => needsDigest(request.key))
      ? await Promise.all(given.map((request) => boundedKey(request.key)))
      : given.map((request) => request.key);
    resolvePolicies(
      "limit",
      given.map((request, i) => ({ ...request, key: counted[i] as string })),
      options.failMode ?? "open",
    );
    const parts = await Promise.all(
      [...groups.values()].map((group) => decideGroup(group, given, counted, limitOptions, t)),
    );
    if (parts.some((part) => !part.decided.allowed)) {
      // All or nothing: what the other shards admitted is given back (held one round trip at
      // worst). A refund with the request id deletes that part's record, so a retry is decided
      // afresh there rather than replayed as admitted.
      await Promise.all(
        parts.map(async (part) => {
          const receipt = part.decided.allowed ? part.decided.receipt : undefined;
          if (!receipt) return;
          const shard = byName.get(part.shard) as Shard;
          const outcome = await shard.limiter.refund(receipt);
          part.refunded = outcome.refunded;
          if (outcome.refunded) delete part.decided.receipt;
        }),
      );
      // A part admitted with concurrency slots gives them back too: the request holds none.
      await Promise.all(
        parts.map((part) => {
          const slots = part.decided.allowed ? part.decided.slots : undefined;
          if (!slots || slots.length === 0) return undefined;
          delete part.decided.slots;
          return (byName.get(part.shard) as Shard).limiter.release(slots, limitOptions);
        }),
      );
    }
    return report(given, mergeParts(given.length, parts, limitOptions.requestId));
  }

  /** One shard's share of a call: as it is, or, for keys moved in a transition, adjusted. */
  async function decideGroup(
    group: Group,
    requests: readonly LimitRequest[],
    counted: readonly string[],
    limitOptions: LimitAllOptions,
    t: number,
  ): Promise<ShardPart> {
    const shard = shards[group.shard] as Shard;
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
    const adjusted = await adjustMoved(shard, own, keys, group.from, t, limitOptions);
    if ("decided" in adjusted) return part(adjusted.decided);
    const decided = await shard.limiter.limitAll(adjusted.requests, limitOptions);
    // The real limit, not the one reduced by the old shard's count (remaining is exact).
    decided.decisions.forEach((decision, j) => {
      const limit = adjusted.limits[j];
      if (limit !== undefined) decision.limit = limit;
    });
    return part(decided, adjusted.requests);
  }

  /**
   * Moved keys' requests as the new shard must decide them (steps 2 and 3 above), or the
   * group's answer when no store call can admit it (the settle interval, a block, an old count
   * that leaves less than the cost, an old shard that cannot be read).
   */
  async function adjustMoved(
    shard: Shard,
    own: readonly LimitRequest[],
    keys: readonly string[],
    from: readonly (number | undefined)[],
    t: number,
    limitOptions: LimitAllOptions,
  ): Promise<
    { decided: MultiDecision } | { requests: LimitRequest[]; limits: (number | undefined)[] }
  > {
    const policies = (): ResolvedPolicy[] =>
      resolvePolicies(
        "limit",
        own.map((request, j) => ({ ...request, key: keys[j] as string })),
        options.failMode ?? "open",
      );
    if (t < settledAt) {
      // Step 2: the old shard's last answers may still be landing.
      const until = settledAt;
      return {
        decided: denied(
          policies().map((policy, j) =>
            from[j] === undefined
              ? notAsked(policy, t)
              : fromCache(policy, { minCost: 1, remaining: 0, until }, t),
          ),
        ),
      };
    }
    const read = await Promise.all(
      own.map(async (request, j) => {
        const old = from[j];
        if (old === undefined) return { request, limit: undefined };
        const oldShard = shards[old] as Shard;
        let limit = request.limit;
        if (request.overrides === true) {
          const plan = await movedPlan(shard, oldShard, request, limitOptions);
          if (plan === undefined) return { failed: oldShard };
          if (plan.blockedUntil !== undefined) {
            return { blockedUntil: plan.blockedUntil, storeNow: plan.now };
          }
          limit = plan.limit ?? limit;
        }
        const cost = request.cost ?? 1;
        const adjusted = { ...request, lease: false, overrides: false };
        if (!isLogAlgorithm(request.algorithm ?? "sliding-log")) {
          // Counters start afresh on the new shard (see the file's note).
          return limit < cost
            ? { short: limit, retryAt: t + request.windowMs }
            : { request: { ...adjusted, limit }, limit };
        }
        if (limit < cost) return { short: limit, retryAt: t + request.windowMs };
        const count = await counts.read(
          old,
          oldShard.ctx,
          { ...request, key: keys[j] as string, limit },
          transitionEnd(request),
        );
        if (!count) return { failed: oldShard };
        const left = limit - count.used;
        if (left < cost)
          return { short: Math.max(0, left), retryAt: Math.max(t + 1, count.retryAt) };
        return { request: { ...adjusted, limit: left }, limit };
      }),
    );
    const failed = read.find((r) => "failed" in r);
    if (failed && "failed" in failed) return { decided: degradedOn(failed.failed)(policies()) };
    const blocked = read.findIndex((r) => "blockedUntil" in r);
    if (blocked >= 0) {
      const hit = read[blocked] as { blockedUntil: number; storeNow: number };
      const waitMs = hit.blockedUntil === 0 ? 0 : Math.max(1, hit.blockedUntil - hit.storeNow);
      return { decided: blockedRequest(policies(), blocked, t, waitMs) };
    }
    if (read.some((r) => "short" in r)) {
      return {
        decided: denied(
          policies().map((policy, j) => {
            const r = read[j];
            return r && "short" in r
              ? fromCache(policy, { minCost: 1, remaining: r.short, until: r.retryAt ?? t + 1 }, t)
              : notAsked(policy, t);
          }),
        ),
      };
    }
    const ok = read as { request: LimitRequest; limit: number | undefined }[];
    return { requests: ok.map((r) => r.request), limits: ok.map((r) => r.limit) };
  }

  /**
   * A moved key's override and block during its transition: the new shard's, else the old
   * one's, which is then copied to the new shard (off the request path) so that it stays with
   * the key once the old placement is forgotten. Undefined when a shard did not answer.
   */
  async function movedPlan(
    to: Shard,
    old: Shard,
    request: LimitRequest,
    limitOptions: LimitAllOptions,
  ): Promise<Awaited<ReturnType<typeof planOf>> | undefined> {
    const target = { policy: request.policy, key: request.key };
    try {
      const fresh = await withDeadline(timeoutMs, () => planOf(to.ctx, target));
      if (fresh.limit !== undefined || fresh.blockedUntil !== undefined) return fresh;
      const kept = await withDeadline(timeoutMs, () => planOf(old.ctx, target));
      const copies: Promise<unknown>[] = [];
      if (kept.limit !== undefined) {
        copies.push(
          to.limiter.overrides.set(request.policy, request.key, {
            limit: kept.limit,
            algorithm: request.algorithm,
          }),
        );
      }
      if (kept.blockedUntil !== undefined) {
        const seconds =
          kept.blockedUntil === 0 ? undefined : Math.ceil((kept.blockedUntil - kept.now) / 1000);
        if (seconds === undefined || seconds >= 1) {
          copies.push(to.limiter.blocks.add(target, seconds === undefined ? {} : { seconds }));
        }
      }
      if (copies.length > 0) {
        const copied = Promise.allSettled(copies);
        limitOptions.waitUntil?.(copied);
      }
      return kept;
    } catch (error) {
      old.ctx.onStoreError?.(error);
      return undefined;
    }
  }

  /** The shards a change of `key`'s plans goes to: both placements while a reshard is configured. */
  function planTargets(key: unknown): number[] {
    if (typeof key !== "string") return [0];
    const t = now();
    if (!previous || t >= endsBy) return [route(key, t).to];
    const before = previousIndex[previous.of(key)] as number;
    const after = current.of(key);
    return before === after ? [after] : [after, before];
  }

  const plans = createShardedPlans({
    names: layout.names,
    limiters: shards.map((shard) => shard.limiter),
    targets: planTargets,
  });
  const first = shards[0] as Shard;
  const shardFor = (key: unknown) =>
    shards[typeof key === "string" ? route(key, now()).to : 0] as Shard;

  return {
    async limit(request, limitOptions) {
      const { decisions } = await limitAll([request], {
        ...(limitOptions?.waitUntil ? { waitUntil: limitOptions.waitUntil } : {}),
        ...(limitOptions?.region !== undefined ? { region: limitOptions.region } : {}),
      });
      return decisions[0] as MultiDecision["decisions"][number];
    },
    limitAll,
    refund(receipt, refundOptions) {
      const counted = receipt as CountedReceipt;
      if (Array.isArray(counted?.parts)) {
        return refundParts(counted, refundOptions?.policies, (name) => byName.get(name)?.limiter);
      }
      const named = typeof counted?.shard === "string" ? byName.get(counted.shard) : undefined;
      // A receipt that names no shard: the one its key lives on now (or the first, which
      // answers a receipt it cannot read as one store does).
      const shard = named ?? shardFor(counted?.resolved?.[0]?.clientKey);
      return shard.limiter.refund(receipt, refundOptions);
    },
    async endLeases() {
      await Promise.all(shards.map((shard) => shard.limiter.endLeases()));
    },
    forget(request) {
      counts.clear();
      for (const shard of shards) shard.limiter.forget(request);
    },
    async peek(request) {
      const shard = shardFor(request?.key);
      const peeked = await shard.limiter.peek(request);
      if (peeked.peeked) peeked.shard = shard.name;
      return peeked;
    },
    async reset(request) {
      // Both placements while a reshard may hold the key's count on its old shard.
      const targets = planTargets(request?.key);
      counts.clear();
      const outcomes = await Promise.all(
        targets.map((index) => (shards[index] as Shard).limiter.reset(request)),
      );
      return {
        existed: outcomes.some((outcome) => outcome.existed),
        regionsFailed: outcomes.flatMap((outcome) => outcome.regionsFailed),
      };
    },
    overrides: plans.overrides,
    blocks: plans.blocks,
    networks: first.limiter.networks,
    plans: plans.plans,
    networkBlocks: (blockOptions) => first.limiter.networkBlocks(blockOptions),
    shards: () =>
      shards.map((shard, i) => ({
        name: shard.name,
        breaker: shard.ctx.breaker.state,
        placed: i < layout.placed,
        previous: reshard?.from.includes(shard.name) ?? false,
      })),
    placement(t = now()): ShardPlacement {
      const placed = [...current.names];
      if (!reshard) return { phase: "stable", shards: placed };
      return {
        phase: t < at ? "before" : t < endsBy ? "transition" : "after",
        shards: t < at ? [...reshard.from] : placed,
        from: [...reshard.from],
        at,
        settledAt,
        transitionEndsBy: endsBy,
      };
    },
    shardOf: (key, t = now()) => (shards[route(key, t).to] as Shard).name,

    async release(given, releaseOptions) {
      // Each slot to the shard that holds it: named on the slot a decision handed out, else
      // (a slot id given back by hand, as /check/release takes it) the key's shard now.
      const slots: readonly ReleaseInput[] = Array.isArray(given) ? given : [given as ReleaseInput];
      const t = now();
      const byShard = new Map<Shard, number[]>();
      for (const [i, slot] of slots.entries()) {
        const named = slot.shard === undefined ? undefined : byName.get(slot.shard);
        const shard = named ?? (shards[route(slot.key, t).to] as Shard);
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
      const counts = await Promise.all(shards.map((shard) => shard.limiter.inFlight(policies)));
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
