/**
 * What a limiter says about its shards (docs/shards.md), for /check/stats and the dashboard:
 * plain data, read with `limiter.shards()` and `limiter.placement()`.
 */
import type { BreakerState } from "../circuit-breaker";

/** One shard of a limiter and its health in this isolate. */
export interface ShardState {
  /** Its name: the record's key, or the array position ("0", "1"…); "" for a single store. */
  name: string;
  /** This shard's circuit breaker in this isolate (each shard has its own). */
  breaker: BreakerState;
  /** Keys are placed on it by the placement in force now. */
  placed: boolean;
  /** It is one of `reshard.from` (the shards before the change). */
  previous: boolean;
}

/** The placement a limiter decides with at an instant. */
export interface ShardPlacement {
  /**
   * "single": one store; "stable": shards, no reshard in progress; "before": a reshard is
   * configured and its instant has not come (keys are placed over `from`); "transition": from
   * the instant, keys are placed over `shards`, and a moved key's count on its old shard still
   * counts against its limit; "after": the transition has ended for every window (at most 7 days).
   */
  phase: "single" | "stable" | "before" | "transition" | "after";
  /** The names keys are placed over now. */
  shards: string[];
  /** With a reshard: the names before it, its instant (unix ms). */
  from?: string[];
  at?: number;
  /**
   * With a reshard: the end of the first interval after `at` in which moved keys are denied
   * (the old shard's last answers may still be landing), unix ms.
   */
  settledAt?: number;
  /**
   * With a reshard: the latest end of the transition (a policy's own ends `windowMs` after
   * `settledAt`, plus the longest a lease stamps ahead): when `reshard.stores` and the old
   * config can go, unix ms.
   */
  transitionEndsBy?: number;
}
