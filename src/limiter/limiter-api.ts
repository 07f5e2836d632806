/**
 * The `Limiter`: what createLimiter returns, the one handle on a limiter's keys — its decisions
 * and everything else done to them (peek, reset, overrides, key and network blocks), on the
 * prefix, clock, store and regions it was built with.
 */
import type { NetworkBlocks } from "../net/network-blocks";
import type { InFlightCount } from "../store/in-flight";
import type { NetworkBlocksOptions } from "./network-block-copies";
import type { Peek } from "./peek";
import type { KeyBlocksAdmin, NetworkBlocksAdmin, Overrides } from "./plan-changes";
import type { Plans } from "./plan-listing";
import type { ReleaseInput, ReleaseOptions } from "./release-slots";
import type { ResetOutcome, ResetRequest } from "./reset";
import type { ShardPlacement, ShardState } from "./shards/types";
import type {
  Decision,
  LimitAllOptions,
  LimitRequest,
  MultiDecision,
  RefundOutcome,
  RefundReceipt,
  ReleaseOutcome,
  SettleOutcome,
  SettleUnits,
} from "./types";

export interface Limiter {
  /**
   * Decide one request. Never throws on a store failure: those become fail-open / fail-closed
   * decisions. Rejects with PolicyBoundsError (its `field` and `index` name what), before the
   * denial cache, the breaker and any store call, for a request the store must not be asked
   * with: a policy name outside [A-Za-z0-9_.-]{1,64}, a key that is not a non-empty string, an
   * unknown algorithm or fail mode, a limit, window (integer ms, 1 to 7 days) or cost (integer,
   * 1 to limit) out of bounds, or past the caps of store/caps.ts (docs/check-api.md "Limits"). Such a
   * request is never a store failure: it does not move the breaker or the clock.
   */
  limit(
    request: LimitRequest,
    options?: Pick<LimitAllOptions, "waitUntil" | "region">,
  ): Promise<Decision>;
  /**
   * Decide one request against several policies in one store call, all or nothing: if any
   * denies, none consumes. Never throws. The policies must be distinct (policy, key, algorithm):
   * the script checks every entry against the same stored count, so the same one twice would be
   * admitted twice (the config and /check refuse duplicate rule names for this reason).
   * Rejects with PolicyBoundsError, like `limit`, for any policy out of bounds (`index` is its
   * position in `requests`).
   */
  limitAll(requests: readonly LimitRequest[], options?: LimitAllOptions): Promise<MultiDecision>;
  /**
   * Give back what an admitted request consumed (all its policies, or the named ones): exact for
   * the sliding log, best effort for the others (see src/store/refund.ts). Forgets this
   * isolate's cached denials of those keys. Never throws: a receipt that is not one `limitAll`
   * returned (a field out of the bounds `limit` checks) answers `refunded: false` with the
   * PolicyBoundsError as `error`, without asking the store (not a store failure).
   */
  refund(
    receipt: RefundReceipt,
    options?: { policies?: readonly string[] },
  ): Promise<RefundOutcome>;
  /**
   * Settle an admitted request's usage (docs/usage.md): in each of its usage rules (the weighted
   * log, `sliding-log-weighted`; a `fixed-window` or `calendar` request with `usage: true`) its
   * reservation (the cost it was admitted with) becomes `units`: the difference charged, even
   * past the limit, or given back, in the window or period it was counted in while that runs.
   * Once per admission: again answers "already-settled" and changes nothing. Never throws.
   * `units` is one figure for every usage rule, or one per rule by name (rules that read their
   * usage differently); a usage rule left out keeps its reservation and stays unsettled.
   */
  settle(receipt: RefundReceipt, units: SettleUnits): Promise<SettleOutcome>;
  /**
   * Gives back concurrency slots (`decision.slots`, docs/concurrency.md) when their requests end:
   * one store call for all of them. Never throws: answers per slot whether it was held
   * (`released`), or the store's failure as `error`. With `waitUntil` the call is kept alive past
   * the response (there is no need to await it) and a failed release is retried off the path a
   * bounded number of times (`retrying`). A slot never released lapses at its timeout.
   */
  release(
    slots: ReleaseInput | readonly ReleaseInput[],
    options?: ReleaseOptions,
  ): Promise<ReleaseOutcome>;
  /**
   * How many concurrency slots each named policy holds now over all its keys (an admin look:
   * a bounded scan of its sets, `complete: false` past the bound). Rejects on a store failure.
   */
  inFlight(policies: readonly string[]): Promise<InFlightCount[]>;
  /**
   * Ends every lease this limiter holds now and gives back their unspent units (before an
   * isolate goes away, and in tests). Never throws.
   */
  endLeases(): Promise<void>;
  /** Forget this isolate's cached denial of a key (after a reset or refund done elsewhere). */
  forget(request: Pick<LimitRequest, "policy" | "key" | "limit" | "windowMs" | "algorithm">): void;
  /**
   * What this request would get now, counting nothing: the sliding log only (another algorithm
   * answers `peeked: false`, saying why). A policy with `overrides` is peeked at the key's
   * override, or answered blocked (`source: "block"`). Rejects with PolicyBoundsError, like
   * `limit`, for a request out of bounds, and on a store failure (no breaker, no fallback: an
   * admin look, not a decision).
   */
  peek(request: LimitRequest): Promise<Peek>;
  /**
   * Forgets the key's count and the request ids decided on it (the next request starts with the
   * whole limit), this isolate's memory of it (`forget`) and every region's leases of it. The
   * limit and window name the cached denial to forget; the algorithm, which count (each has its
   * own). Rejects with PolicyBoundsError like `limit`, and when home's store fails; a region
   * that fails is reported in `regionsFailed`.
   */
  reset(request: ResetRequest): Promise<ResetOutcome>;
  /**
   * A policy's limit for one client key (docs/plans.md), read by requests with `overrides: true`.
   * Results are returned (`ok: false` names the field); a store failure rejects. An isolate
   * that remembers a denial or block of the key (this one included, until `forget`) applies the
   * change within OVERRIDE_CLAIM_MAX_MS (1 s).
   */
  overrides: Overrides;
  /** Key blocks (docs/plans.md): read with the overrides; as `overrides` for results. */
  blocks: KeyBlocksAdmin;
  /** Network blocks (docs/plans.md): matched from each isolate's copy (`networkBlocks`). */
  networks: NetworkBlocksAdmin;
  /** The overrides, key blocks and network blocks as stored, a page at a time. */
  plans: Plans;
  /**
   * This isolate's copy of the network blocks, for the middleware's `networkBlocks` option:
   * built once per limiter and options (the same object for the same options), loaded from this
   * limiter's store under its prefix, on its clock.
   */
  networkBlocks(options?: NetworkBlocksOptions): NetworkBlocks;
  /**
   * Every shard and its breaker in this isolate (docs/shards.md), in `store`'s order, then the
   * shards being removed (`reshard.stores`). One entry named "" for a single store.
   */
  shards(): ShardState[];
  /** The placement in force at `now` (unix ms, default the limiter's clock). */
  placement(now?: number): ShardPlacement;
  /**
   * The shard that decides `key` at `now` (default the limiter's clock): its name ("" for a
   * single store). The key as the rules give it (the one `LimitRequest.key` carries).
   */
  shardOf(key: string, now?: number): string;
}
