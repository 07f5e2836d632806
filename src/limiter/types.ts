/**
 * The limiter's public data types: what callers pass in and get back, plain data that imports
 * no implementation file (the `Limiter` itself, with its methods, is in limiter-api.ts).
 */

import type { Algorithm } from "../store/algorithm";
import type { CalendarPeriod } from "./calendar-period";

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
  /**
   * The shard that decided it (docs/shards.md): set only when the limiter has several shards
   * (or a reshard), absent for a single store.
   */
  shard?: string;
  /**
   * A concurrency policy's slot, when this decision admitted the request (and its request was
   * admitted): give it back with `limiter.release` when the request ends.
   */
  slot?: ConcurrencySlot;
}

/**
 * A concurrency slot an admitted request holds (docs/concurrency.md): what `limiter.release`
 * takes to give it back. A slot never released lapses at `expires`.
 */
export interface ConcurrencySlot {
  /** The policy (rule) name. */
  policy: string;
  /** The client key as counted (a long key is its digest: pass it back as it is). */
  key: string;
  /** The slot's id: unique per acquire, or the same for a request id's retry. */
  slot: string;
  /** Store-clock ms when the slot lapses if it is never released (the policy's timeout). */
  expires: number;
  /** The shard that holds it, when the limiter has shards (docs/shards.md). */
  shard?: string;
}

/** What `limiter.release` did: one answer per slot, never thrown. */
export interface ReleaseOutcome {
  /**
   * Per slot, in the order given: true when it was held and is now given back; false when it
   * was not there (unknown, another key's, released already, or lapsed at its timeout).
   * Empty when the store could not be asked.
   */
  released: boolean[];
  /** Set when the store failed or a slot is not one a decision handed out. */
  error?: string;
  /**
   * The store failed and the release is retried off the request path (through `waitUntil`) a
   * bounded number of times; a slot whose release never lands lapses at its timeout.
   */
  retrying?: boolean;
}

export type FailMode = "open" | "closed";
// Whose clock orders the log, and the event of a store refusing its own: the store's clock
// policy (store/store-clock.ts) defines them, one per store client.

// The limiter's options (createLimiter's argument) live in limiter-options.ts.

export interface LimitRequest {
  /** Policy (rule) name: part of the Redis key and of the headers. [A-Za-z0-9_.-]+ */
  policy: string;
  /** The client key (IP, API key, user id…): any string. */
  key: string;
  limit: number;
  /** The window in ms. A calendar policy's is its period's longest length (LONGEST_PERIOD_MS). */
  windowMs: number;
  /**
   * A quota per calendar period (docs/calendar-quotas.md): required with, and only with,
   * `algorithm: "calendar"`. `windowMs` is then read from the period, whatever is passed.
   */
  period?: CalendarPeriod;
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
  /**
   * A usage rule's policy (docs/usage.md): `cost` is a reservation that `limiter.settle` makes
   * what the request used, once. Counted in "sliding-log-weighted" (always settleable),
   * "fixed-window" or "calendar", whose limits then go up to 10^12 units. @default false
   */
  usage?: boolean;
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
 * What `refund` needs to give back what one admitted request consumed. Pass it back as it is:
 * the limiter keeps its own record of how each policy was counted in it, beside these fields.
 */
export interface RefundReceipt {
  /** The evaluation's member id (the log's members are `<memberId>.<n>`). */
  memberId: string;
  /** The policies' names, in request order. */
  policies: string[];
  /** What the request consumed of each policy, parallel to `policies`. */
  costs: number[];
  /** The store's clock when it decided: the window the request was counted in. */
  at: number;
  requestId?: string;
}

/** Keeps a promise alive past the response (`ctx.waitUntil`). */
export type WaitUntil = (promise: Promise<unknown>) => void;

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
  /**
   * The concurrency slots this admitted request holds, one per concurrency policy (also on a
   * request id's replay: the same slots): give them back with `limiter.release` when it ends.
   */
  slots?: ConcurrencySlot[];
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
  /**
   * Set when every policy asked was refunded before (a retried refund): nothing was given back
   * again, `refunded` is false.
   */
  alreadyRefunded?: true;
  /** Set when the store could not be asked or failed. */
  error?: string;
}

/** What a request used: one figure for all its usage rules, or one per usage rule by name. */
export type SettleUnits = number | Readonly<Record<string, number>>;

/**
 * What `limiter.settle` did with an admitted request's usage (docs/usage.md). "settled": its
 * usage rules now hold what it used (`charged`: units charged per usage rule, negative when given
 * back); "already-settled": it was settled before, nothing changed; "unknown": nothing to settle
 * (not a usage request, never admitted, refunded, out of every window, its window or period over,
 * or a day past its admission on one); "failed": the store
 * could not be asked (`error`), nothing is known to have changed (a request over several shards:
 * `charged` holds what the shards that answered charged; a retry charges each part once).
 */
export interface SettleOutcome {
  status: "settled" | "already-settled" | "unknown" | "failed";
  /** The usage rules settled, and per rule the units charged (negative: given back). */
  policies: string[];
  charged: number[];
  error?: string;
}

/**
 * A settle's charges, as the limiter's `onSettle` hook is told them (docs/analytics.md): one
 * request's usage rules, each with what was charged now.
 */
export interface SettledUsage {
  /** The store's clock when the request was admitted (its receipt's `at`), in ms. */
  at: number;
  /**
   * Per usage policy settled: its name, the client key as counted (a long key is its digest),
   * and the units charged now, negative when given back. Policies charged 0 are left out.
   */
  charges: { policy: string; key: string; units: number }[];
}
