/**
 * A sharded limiter's shards (docs/shards.md): one store limiter per shard, each with its own
 * store, capped breaker, clock policy and leases, all sharing one denial cache, one fallback and
 * one table of local concurrency slots.
 */
import type { FenceView } from "../../store/placement-fence";
import { type BreakerEvent, cappedCooldown } from "../circuit-breaker";
import type { LimiterContext } from "../context";
import { createDegradedPath } from "../degraded";
import { createDenialCache, type DenialCache } from "../denial-cache";
import { createFallbackLimiter } from "../fallback-limiter";
import type { Limiter } from "../limiter-api";
import type { LimiterOptions, StoreLimiterOptions } from "../limiter-options";
import { createLocalSlots } from "../local-slots";
import type { ResolvedPolicy } from "../resolved-policy";
import type { MultiDecision } from "../types";
import type { ShardLayout } from "./options";

/** A shard's breaker probes again within this (ms) after it opened, so a recovered shard's keys
 * are decided by Redis again soon (its cool-down doubles up to this, not to 30 s). */
export const SHARD_MAX_COOLDOWN_MS = 1_500;

/** One shard's limiter and context, as buildStoreLimiter makes them. */
export type BuildStoreLimiter = (options: StoreLimiterOptions) => {
  limiter: Limiter;
  ctx: LimiterContext;
};

export interface Shard {
  name: string;
  limiter: Limiter;
  ctx: LimiterContext;
}

export interface Shards {
  list: Shard[];
  byName: ReadonlyMap<string, Shard>;
  /** The denial cache every shard shares (false: none). */
  denialCache: DenialCache | false;
  /** The degraded path with `shard`'s breaker and local slots: its keys' failure policy. */
  degradedOn(shard: Shard): (policies: readonly ResolvedPolicy[]) => MultiDecision;
}

export function buildShards(
  options: LimiterOptions,
  layout: ShardLayout,
  build: BuildStoreLimiter,
  /** The placement a call at `t` places keys by (fence.ts): each shard's leases are fenced by it. */
  placementView?: (t: number) => FenceView,
): Shards {
  const now = options.now ?? Date.now;
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
  // One table of local concurrency slots too: a moved key's degraded request goes to its old
  // shard's failure policy or its new shard's (whichever path failed), and its slots in this
  // isolate are one count against its share either way.
  const localSlots = createLocalSlots();
  const { store: _store, reshard: _reshard, onDecision: _onDecision, ...common } = options;
  const { onBreakerChange } = common;
  // A sick shard stops only its own keys: each shard's cool-down is capped, as a region
  // store's is (circuit-breaker.ts's cappedCooldown).
  const breaker = cappedCooldown(common.breaker, SHARD_MAX_COOLDOWN_MS);
  const list: Shard[] = layout.clients.map((client, i) => {
    const name = layout.names[i] as string;
    return {
      name,
      ...build({
        ...common,
        store: client,
        placementView,
        denialCache,
        fallback,
        localSlots,
        breaker,
        // Each shard's breaker says whose it is: one shard down is not the store down.
        ...(onBreakerChange
          ? { onBreakerChange: (event: BreakerEvent) => onBreakerChange({ ...event, shard: name }) }
          : {}),
      }),
    };
  });
  return {
    list,
    byName: new Map(list.map((shard) => [shard.name, shard])),
    denialCache,
    degradedOn: (shard) =>
      createDegradedPath({
        now,
        fallback: fallback === false ? undefined : fallback.limiter,
        fallbackFraction: fallback === false ? 0 : (fallback.fraction ?? 1),
        breaker: shard.ctx.breaker,
        localSlots,
      }),
  };
}
