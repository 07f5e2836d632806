/**
 * This isolate's decisions per shard and source (docs/shards.md), for /check/stats and the
 * dashboard: which shard answers, and which one sends its keys to the fallback. Counted from
 * the limiter's onDecision hook; bounded by the shards (at most 16) times the sources.
 */
import type { Limiter, MultiDecision } from "edge-limiter";

export interface ShardTally {
  record(decided: MultiDecision): void;
  /** Each shard's state (its breaker, whether keys are placed on it) and what it decided. */
  report(limiter: Limiter): ShardsReport;
}

interface ShardsReport {
  placement: ReturnType<Limiter["placement"]>;
  shards: (ReturnType<Limiter["shards"]>[number] & { decided: Record<string, number> })[];
}

export function createShardTally(): ShardTally {
  const byShard = new Map<string, Record<string, number>>();
  return {
    record(decided) {
      for (const decision of decided.decisions) {
        if (decision.shard === undefined) continue;
        let counts = byShard.get(decision.shard);
        if (!counts) {
          counts = {};
          byShard.set(decision.shard, counts);
        }
        counts[decision.source] = (counts[decision.source] ?? 0) + 1;
      }
    },
    report(limiter) {
      return {
        placement: limiter.placement(),
        shards: limiter
          .shards()
          .map((shard) => ({ ...shard, decided: { ...(byShard.get(shard.name) ?? {}) } })),
      };
    },
  };
}
