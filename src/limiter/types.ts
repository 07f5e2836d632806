/**
 * The limiter's public types: what callers pass in and get back. config/, http/ and the rules
 * import these, never the implementation (create-limiter.ts).
 */

import type { NetworkBlocks } from "../net/network-blocks";
import type { Algorithm } from "../store/algorithm";
import type { LeaseSpend, WaitUntil } from "./lease";
import type { NetworkBlocksOptions } from "./network-block-copies";
import type { Peek } from "./peek";
import type { KeyBlocksAdmin, NetworkBlocksAdmin, Overrides } from "./plan-changes";
import type { Plans } from "./plan-listing";
import type { RegionalSpend } from "./regional-leases";
import type { ResetOutcome, ResetRequest } from "./reset";
import type { ResolvedPolicy } from "./resolved-policy";

/**
 * Where a decision came from. "lease": spent from a lease this isolate holds (docs/leases.md);
 * "region": decided in the request's region, from a regional lease or a denial home decided
 * (docs/regions.md). "block": the client key is blocked (docs/plans.md): nothing counted.
 */
export type DecisionSource =
  | "redis"
  | "cache"
  | "fail-open"
  | "fail-closed"
  | "fallback"
  | "lease"
  | "region"
  | "block";

/** One decision, shared by every surface (proxy, /check, middleware). */
export interface Decision {
  allowed: boolean;
  /** The policy's limit (units per window). */
  limit: number;
  /** Units left in the window after this decision. */
  remaining: number;
  /** Unix time (ms) when capacity next frees. */
  reset: number;
  /** ms from the decision until `reset` (clock-independent: headers use this, not `reset`). */
  resetAfterMs: number;
  /** ms until a request of this cost could pass; 0 when allowed. */
  retryAfterMs: number;
  source: DecisionSource;
  /** The policy (rule) this decision is for. */
  policy: string;
  /** The window in ms (for the RateLimit-Policy header). */
  windowMs: number;
  /** How the policy counts. */
  algorithm: Algorithm;
}

export type FailMode = "open" | "closed";
// Whose clock orders the log, and the event of a store refusing its own: the store's clock
// policy (store/store-clock.ts) defines them, one per store client.
export type { ClockChangeEvent, ClockSource } from "../store/store-clock";

// The limiter's options (createLimiter's argument) live in limiter-options.ts.
export type { FallbackOptions, LimiterOptions } from "./limiter-options";

export interface LimitRequest {
  /** Policy (rule) name: part of the Redis key and of the headers. [A-Za-z0-9_.-]+ */
  policy: string;
  /** The client key (IP, API key, user id…): any string. */
  key: string;
  limit: number;
  windowMs: number;
  /** @default 1 */
  cost?: number;
  /** Per-request override of the limiter's fail mode. @default the limiter's `failMode` */
  failMode?: FailMode;
  /** How this policy counts (docs/algorithms.md). @default "sliding-log" */
  algorithm?: Algorithm;
  /**
   * Let this isolate lease units of a hot key and decide from them with no round trip, still
   * exactly (docs/leases.md). Honoured for the sliding log only (other algorithms are decided
   * by the store; the config refuses the combination). @default false
   */
  lease?: boolean;
  /**
   * Read this key's limit override and block from the store's plans (docs/plans.md) in the same
   * script call: one command more per store decision. A denial of such a policy is cached at most
   * OVERRIDE_CLAIM_MAX_MS, and it is never leased, so a change applies everywhere within that.
   * @default false
   */
  overrides?: boolean;
}

export interface LimitAllOptions {
  /**
   * A request id (Idempotency-Key, cf-ray, a caller's own id): a retry carrying it within the
   * longest window is not counted again and gets the original decision (`replayed: true`).
   */
  requestId?: string;
  /**
   * Keeps background store calls (a lease, the give-back of a lease's unspent units) alive past
   * the response: pass the Worker's `ctx.waitUntil` (bound). Without it they run unattended,
   * and a runtime that drops them after the response only holds capacity longer (never more
   * admissions). @default none
   */
  waitUntil?: WaitUntil;
  /**
   * The region this request is decided in (one of `regions.stores`; docs/regions.md). An
   * unknown name, or none, is home. @default `regions.regionOf`, else home
   */
  region?: string;
}

/**
 * What `refund` needs to give back what one admitted request consumed. Pass it back as it is;
 * only `policies` is meant to be read.
 */
export interface RefundReceipt {
  /** The evaluation's member id (the log's members are `<memberId>.<n>`). */
  memberId: string;
  /** The policies' names, in request order. */
  policies: string[];
  /**
   * Every policy as it was evaluated (Redis key, algorithm, limit, window, cost, denial-cache
   * key), parallel to `policies`.
   */
  resolved: readonly ResolvedPolicy[];
  /** The store's clock when it decided: the window the request was counted in. */
  at: number;
  requestId?: string;
  /** Internal: for a request paid from leases, where each policy's units came from. */
  leased?: readonly LeaseSpend[];
  /** Internal: for a request paid from regional leases, which region and leases paid. */
  regional?: RegionalSpend;
  /** Internal: for a request paid from isolate leases taken from a region, that region. */
  leasedIn?: string;
}

/** One request decided against several policies, all or nothing. */
export interface MultiDecision {
  /** Every policy admitted, and every policy consumed its cost (a denial consumes nothing). */
  allowed: boolean;
  /**
   * One decision per request, in order. `allowed` is what that policy alone says; in a denied
   * request, `remaining` of a policy that alone allowed does not count this request's cost.
   * When the denial cache denied the request without asking the store, a policy it did not
   * deny reports `allowed: true`, `remaining: limit` (an upper bound: not read, nothing
   * consumed) and `resetAfterMs: 0`, with source "cache".
   */
  decisions: Decision[];
  /** When denied: the denying policy with the longest wait (the one Retry-After honours). */
  deniedBy?: string;
  /** The stored answer to an earlier check with the same request id: nothing was counted now. */
  replayed: boolean;
  /**
   * Set when the request id was already decided with other parameters (a policy's algorithm,
   * limit, window or cost differs from what the id's record remembers): nothing was decided or
   * counted, `allowed` is false, and every decision says so with `retryAfterMs: 0` (waiting does
   * not help: a retry must repeat the request, or carry a new id). /check answers 409.
   */
  conflict?: RequestIdConflict;
  /** Present when the store admitted and counted this request now: what `refund` takes. */
  receipt?: RefundReceipt;
  /**
   * The region the request was decided for (docs/regions.md), whoever decided it: the region,
   * an isolate lease taken from it, or home on a miss. Absent for a request decided as home's.
   */
  region?: string;
  /**
   * Set when a policy's client key is blocked (docs/plans.md): nothing was counted, `allowed` is
   * false and that policy's decision has source "block".
   */
  blocked?: { policy: string; key: string; until?: number };
}

/** A request id's retry that differs from the request it retries (MultiDecision.conflict). */
export interface RequestIdConflict {
  /** The first policy (rule) that differs. */
  policy: string;
  field: "algorithm" | "limit" | "windowMs" | "cost";
  /** The value the id was decided with, and this request's (as the store compared them). */
  recorded: string;
  asked: string;
}

export interface RefundOutcome {
  /** False when nothing was given back (a request id already refunded, or the store failed). */
  refunded: boolean;
  /** Units given back per refunded policy, in the order asked. */
  units: number[];
  /** Set when the store could not be asked or failed. */
  error?: string;
}

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
   * Ends every lease this limiter holds now and gives back their unspent units (before an
   * isolate goes away, and in tests). Never throws.
   */
  endLeases(): Promise<void>;
  /** Forget this isolate's cached denial of a key (after a reset or refund done elsewhere). */
  forget(request: Pick<LimitRequest, "policy" | "key" | "limit" | "windowMs" | "algorithm">): void;
  /**
   * What this request would get now, counting nothing: the sliding logs only (another algorithm
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
}

// The limiter's defaults live in defaults.ts (a leaf: config/ reads them without loading the
// implementation); re-exported here for the limiter's own files.
export { DEFAULT_LIMITER_TIMEOUT_MS } from "./defaults";
export type { ResetOutcome, ResetRequest };
