/**
 * createLimiter's options (public: the package entry exports them).
 */
import type { FenceView } from "../store/placement-fence";
import type { ScriptClient } from "../store/script-runner";
import type { ClockChangeEvent, ClockSource } from "../store/store-clock";
import type { BreakerEvent, CircuitBreakerOptions } from "./circuit-breaker";
import type { DenialCache, DenialCacheOptions } from "./denial-cache";
import type { FallbackLimiter, FallbackLimiterOptions } from "./fallback-limiter";
import type { LeaseOptions } from "./leases/lease-sizing";
import type { LocalSlots } from "./local-slots";
import type { ReshardOptions, StoreShards } from "./shards/options";
import type { FailMode, LimitRequest, MultiDecision, SettledUsage } from "./types";

export interface FallbackOptions extends FallbackLimiterOptions {
  /**
   * Share of the rule's limit each isolate admits on its own while the store is down.
   * @default 1
   */
  fraction?: number;
  /**
   * An existing fallback limiter (to share or inspect it).
   * @default a new one, from these options
   */
  limiter?: FallbackLimiter;
}

export interface LimiterOptions {
  /**
   * The Redis client (any object with `evalsha` and `eval` of `@upstash/redis`). From
   * createStoreClient, it also has `withTimeout`, which bounds a NOSCRIPT → EVAL by the time left.
   *
   * Or several shards (docs/shards.md): an array of clients (named by position: "0", "1"…) or a
   * record of them by name. Each client key lives on one shard (rendezvous hashing of the key
   * over the names), with its own breaker; decisions then name their `shard`. Per-deployment
   * data (network blocks) lives on the first shard listed. An empty list, a client given twice
   * or one that is not a client throws, naming the field.
   */
  store: StoreShards;
  /**
   * A change of the shards, exact across it (docs/shards.md "Reshard"): the names before, and
   * the instant. Bad values throw, naming the field. @default none
   */
  reshard?: ReshardOptions;
  /**
   * Prefix of every Redis key the limiter writes.
   * @default "edge-limiter"
   */
  prefix?: string;
  /**
   * Whose clock orders the log: `"redis"` (TIME inside the script: one clock for every isolate)
   * or `"caller"` (this isolate's clock, passed to the script; for stores that reject
   * non-deterministic scripts).
   * @default "redis"
   */
  clock?: ClockSource;
  /**
   * What to decide when the store cannot answer (timeout, network error, 5xx, garbage) or the
   * breaker is open: `"open"` admits (through the fallback limiter when it is on), `"closed"`
   * denies. A request's own `failMode` wins.
   * @default "open"
   */
  failMode?: FailMode;
  /**
   * The longest a decision waits for the store. Give the store client the same timeout (see
   * createStoreClient): it aborts the HTTP request, this bounds the whole decision (EVALSHA plus
   * a NOSCRIPT → EVAL).
   * @default 500
   */
  timeoutMs?: number;
  /**
   * The per-isolate denial cache: its options, an existing cache (to inspect it), or `false`.
   * @default { maxEntries: 10000 }
   */
  denialCache?: DenialCacheOptions | DenialCache | false;
  /**
   * The local limiter used in fail-open mode while the store is down; `false` admits everything
   * instead. @default { fraction: 1 }
   */
  fallback?: FallbackOptions | false;
  /** Circuit breaker thresholds. @default { failureThreshold: 3, cooldownMs: 1000, maxCooldownMs: 30000 } */
  breaker?: Omit<CircuitBreakerOptions, "now" | "onStateChange">;
  /**
   * Concurrent checks of a key that was exhausted at its last answer wait for the one store call
   * in flight and are denied from its answer when it still denies them (exact), instead of each
   * calling the store.
   * @default true
   */
  singleFlight?: boolean;
  /** The isolate's clock (ms); injectable for tests. @default Date.now */
  now?: () => number;
  /**
   * Leases (docs/leases.md): how a request with `lease: true` is leased, or `false` to decide
   * every request with the store. A request asks for leases itself (`LimitRequest.lease`).
   * @default { maxLifetimeMs: 1000, minUnits: 2, maxShare: 0.25, headroom: 1.5, maxKeys: 10000 }
   */
  leases?: LeaseOptions | false;
  /**
   * Regional leases (docs/regions.md): each region's store, and which region a request is in
   * when `limitAll`'s options name none. A request in a region, whose policies all ask for
   * leases, is decided there from leases home granted it, in one round trip to the region's
   * store. @default none: every request is decided at home
   */
  regions?: RegionsOptions & {
    /** The region of a request whose options name none. @default none (home) */
    regionOf?: (requests: readonly LimitRequest[]) => string | undefined;
  };
  /**
   * Called with every store error (for metrics); never throws into the decision. Given, it
   * replaces the default log's store-error lines.
   * @default one JSON line on console.warn per kind of error (unauthorized, timeout, refused),
   * at most one a cool-down, naming the store and what decides meanwhile (see `log`)
   */
  onStoreError?: (error: unknown) => void;
  /**
   * One structured event per breaker state change. Given, it replaces the default log's
   * breaker lines.
   * @default one JSON line on console.warn when the breaker opens (or stays open after a
   * probe, at most one a cool-down) and when it closes again (see `log`)
   */
  onBreakerChange?: (event: BreakerEvent) => void;
  /**
   * The default log of a degraded store (docs/failure-modes.md "What is logged"): JSON lines
   * on console.warn naming the store, the cause and what decides meanwhile. Unset, it speaks for
   * the hooks above that are not given; `true` writes it beside hooks of your own too (the
   * worker's breaker hook feeds its stats); `false` writes none.
   * @default for the hooks not given
   */
  log?: boolean;
  /**
   * Called once if the store refuses the Redis clock in scripts (a store that wants
   * deterministic scripts): every script on this store client, this limiter's included, has
   * switched to the caller clock for good (whichever script met the refusal).
   * @default one JSON line on console.warn, once per store client
   */
  onClockChange?: (event: ClockChangeEvent) => void;
  /**
   * Called with every decided call (`limit`, `limitAll`), after the decision and before it is
   * returned: for metrics (`createAnalytics(…).record` counts them). Synchronous, on the
   * request path: keep it cheap. What it throws is ignored.
   * @default none
   */
  onDecision?: (requests: readonly LimitRequest[], decided: MultiDecision) => void;
  /**
   * Called after each settle that charged or gave back units (`settle`, and the surfaces that
   * settle through it: the proxy, the middleware, POST /check/settle), with the usage rules'
   * client keys and units: for metrics (`createAnalytics(…).recordSettle` counts them). On a
   * sharded limiter each shard's part of a request reports its own. Synchronous, after the store
   * answered; what it throws is ignored.
   * @default none
   */
  onSettle?: (settled: SettledUsage) => void;
}

/** The options of one store's limiter (one shard's): a single client, no reshard. */
export type StoreLimiterOptions = Omit<LimiterOptions, "store" | "reshard"> & {
  store: ScriptClient;
  /**
   * A shard's limiter: the placement a store call made at `t` places its keys by
   * (store/placement-fence.ts), for the calls no routed request carries (a lease's grant).
   */
  placementView?: ((t: number) => FenceView) | undefined;
  /**
   * A shard's limiter: the isolate's local concurrency slots, shared by every shard (as the
   * fallback is). A moved key's degraded request may be decided on its old shard's path or its
   * new one's: its slots in this isolate must be one count whichever took them.
   * @default a table of this limiter's own
   */
  localSlots?: LocalSlots | undefined;
};

export interface RegionsOptions {
  /** Each region's name and its own store client (createStoreClient). */
  stores: Readonly<Record<string, ScriptClient>>;
  /**
   * The longest a decision waits for a region's store before it asks home instead.
   * @default the limiter's timeoutMs
   */
  timeoutMs?: number;
  /**
   * The longest a regional lease lives: δ = min(maxLifetimeMs, window / 8).
   * @default 10000
   */
  maxLifetimeMs?: number;
  /** A lease below this many units is not asked for. @default 2 */
  minUnits?: number;
}
