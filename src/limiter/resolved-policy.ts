/**
 * LimitRequest → ResolvedPolicy: each policy of a decision checked and resolved once (defaults
 * applied, its cache key built) into the one object the whole decision uses, the store call
 * included. The check is the limiter's only one of what a caller sent: a field the store must
 * not be asked with is the caller's PolicyBoundsError here, before the denial cache, the breaker
 * and the store (never a store failure, never the breaker, never the clock).
 */
import { ownedString, stringBytes } from "../owned-string";
import { DEFAULT_ALGORITHM, LEASABLE } from "../store/algorithm";
import { storePolicyIssue } from "../store/caps";
import { POLICY_NAME, storageKey } from "../store/keys";
import { PolicyBoundsError, type PolicyField, type StorePolicy } from "../store/script-inputs";
import { type CalendarPeriod, LONGEST_PERIOD_MS, periodIssue } from "./calendar-period";
import { DEFAULT_COST } from "./defaults";
import type { FailMode, LimitRequest, RefundReceipt } from "./types";

/**
 * One policy of one decision: what the store runs (StorePolicy: key, algorithm, limit, window,
 * cost; the store reads only those) plus what the limiter needs around the call. One object per
 * policy per decision, passed to the store as it is and kept in the refund receipt.
 */
export interface ResolvedPolicy extends StorePolicy {
  /** The policy (rule) name: decisions, deniedBy, refunds by name. */
  readonly name: string;
  /** The client key as the caller gave it (the storage key encodes it). */
  readonly clientKey: string;
  readonly failMode: FailMode;
  /** Its key in the denial cache and the fallback limiter (denialCacheKey). */
  readonly cacheKey: string;
  /** The request asked for leases and its algorithm can be leased exactly (lease.ts). */
  readonly lease: boolean;
  /** Read its limit override and key block from the plans hash (LimitRequest.overrides). */
  readonly overrides: boolean;
  /** A calendar policy's period (LimitRequest.period). */
  period?: CalendarPeriod | undefined;
  /**
   * Its Redis key (StorePolicy): "" until the store is to be asked (withStorageKeys), so a
   * denial from the cache never builds it. The client key is `clientKey`.
   */
  redisKey: string;
}

/**
 * A request as the sharded limiter's router hands it to a shard: a moved key's limit during a
 * reshard's transition is the asked one less what its old shard holds (shards/transition.ts),
 * and `askedLimit` the asked one, which a request id's record is fingerprinted with
 * (StorePolicy.askedLimit). Never a caller's.
 */
export interface RoutedRequest extends LimitRequest {
  askedLimit?: number;
}

/**
 * The key a request has in the denial cache and the fallback limiter (for `forget` after a reset).
 * The limit, window and algorithm are part of it: ad-hoc checks of one policy may differ in them,
 * and each algorithm counts in its own Redis key.
 */
export function denialCacheKey(
  request: Pick<LimitRequest, "policy" | "key" | "limit" | "windowMs" | "algorithm" | "period">,
): string {
  const algorithm = request.algorithm ?? DEFAULT_ALGORITHM;
  const read =
    algorithm === "calendar" && request.period ? calendarRequest(request as LimitRequest) : request;
  return cacheKeyOf(read, algorithm, request.key);
}

function cacheKeyOf(
  request: Pick<LimitRequest, "policy" | "limit" | "windowMs"> & { windowKey?: string },
  algorithm: string,
  key: string,
): string {
  const window = request.windowKey ?? request.windowMs;
  return `${request.policy}\n${algorithm}\n${request.limit}\n${window}\n${key}`;
}

/**
 * Every request of one call checked, then resolved (resolvePolicy). Throws PolicyBoundsError
 * for the first field past its bounds, the same bounds /check and the config apply (caps.ts
 * storePolicyIssue: algorithm, window, limit, cost and the summed log costs; a cost above the
 * limit), plus what only a library caller can get wrong: a policy name outside POLICY_NAME, a
 * client key that is not a non-empty string, a fail mode that is not "open" or "closed".
 */
export function resolvePolicies(
  caller: string,
  requests: readonly LimitRequest[],
  defaultFailMode: FailMode,
): ResolvedPolicy[] {
  if (!Array.isArray(requests)) throw new PolicyBoundsError(caller, 0, "policy", "no requests");
  // Indexed loops, no iterators: this runs on every decision.
  const policies: ResolvedPolicy[] = [];
  for (let index = 0; index < requests.length; index++) {
    const request = requests[index] as LimitRequest;
    const issue = requestIssue(request);
    if (issue) throw new PolicyBoundsError(caller, index, issue[0], issue[1]);
    policies.push(resolvePolicy(request, defaultFailMode));
  }
  const bounds = storePolicyIssue(policies);
  if (bounds) throw new PolicyBoundsError(caller, bounds.index, bounds.field, bounds.detail);
  // Within the limit: a cost above it could never be admitted (/check and the config say so
  // too; the store alone would answer it as a denial).
  for (let index = 0; index < policies.length; index++) {
    const policy = policies[index] as ResolvedPolicy;
    if (policy.cost > policy.limit) {
      throw new PolicyBoundsError(caller, index, "cost", "must be an integer from 1 to limit");
    }
  }
  return policies;
}

/** What one request (as a plain-JS caller may send it) gets wrong first, or undefined. */
function requestIssue(request: LimitRequest): [PolicyField, string] | undefined {
  if (typeof request !== "object" || request === null) return ["policy", "is not a request"];
  const { policy, key, failMode } = request as unknown as Partial<Record<string, unknown>>;
  if (typeof policy !== "string" || !POLICY_NAME.test(policy)) {
    return ["policy", "must be 1 to 64 of A-Z a-z 0-9 _ . - (it is part of the Redis key)"];
  }
  if (typeof key !== "string" || key.length === 0) return ["key", "must be a non-empty string"];
  const calendar = request.algorithm === "calendar";
  if (calendar !== (request.period !== undefined)) {
    return ["period", calendar ? "is required by a calendar policy" : 'needs algorithm "calendar"'];
  }
  if (calendar && periodIssue(request.period)) {
    return ["period", periodIssue(request.period) as string];
  }
  if (failMode !== undefined && failMode !== "open" && failMode !== "closed") {
    return ["failMode", 'must be "open" or "closed"'];
  }
  return undefined;
}

export function resolvePolicy(given: LimitRequest, defaultFailMode: FailMode): ResolvedPolicy {
  const algorithm = given.algorithm ?? DEFAULT_ALGORITHM;
  const request = algorithm === "calendar" ? calendarRequest(given) : given;
  // The denial cache, the fallback, single flight and leases keep these strings past the
  // request: copies, never views into whatever larger string the caller cut the key from.
  const clientKey = ownedString(request.key);
  const { askedLimit } = request as RoutedRequest;
  const resolved: ResolvedPolicy = {
    name: request.policy,
    clientKey,
    algorithm,
    limit: request.limit,
    windowMs: request.windowMs,
    cost: request.cost ?? DEFAULT_COST,
    failMode: request.failMode ?? defaultFailMode,
    cacheKey: cacheKeyOf(request, algorithm, clientKey),
    // A lease would spend past a change of the override for its whole life: never leased.
    lease: request.lease === true && LEASABLE.has(algorithm) && request.overrides !== true,
    overrides: request.overrides === true,
    redisKey: "",
  };
  if (askedLimit !== undefined) resolved.askedLimit = askedLimit;
  if (request.usage === true) resolved.usage = true;
  if (request.period) resolved.period = request.period;
  return resolved;
}

/**
 * A calendar request with its window read from its period, and the period in its cache key's
 * window (`month@Europe/Berlin@<anchor>`): ad-hoc checks of one policy may name other periods.
 */
function calendarRequest(request: LimitRequest): LimitRequest & { windowKey: string } {
  const period = request.period as CalendarPeriod;
  return {
    ...request,
    windowMs: LONGEST_PERIOD_MS[period.unit],
    windowKey: `${period.unit}@${period.timezone}@${period.anchor ?? ""}`,
  };
}

/**
 * What one resolved policy keeps alive, for the per-isolate byte budgets that hold one (leases,
 * single flight): the object, its cache key (which holds the client key: a concatenation points
 * at its parts) and its Redis key, once built.
 */
export function policyBytes(policy: ResolvedPolicy): number {
  return POLICY_OBJECT_BYTES + stringBytes(policy.cacheKey) + stringBytes(policy.redisKey);
}

/** The object (12 fields), its cache key's concatenation nodes and number strings, rounded up. */
const POLICY_OBJECT_BYTES = 320;

/**
 * Builds the Redis keys of a decision about to ask the store. Total (keys.ts encodes any
 * string), and called before the breaker hands out a permit: nothing a client sent can fail
 * between the permit and the store call.
 */
export function withStorageKeys(policies: readonly ResolvedPolicy[], prefix: string): void {
  for (const policy of policies) {
    policy.redisKey = storageKey(prefix, policy.name, policy.clientKey, policy.algorithm);
  }
}

/**
 * A refund's receipt and policy names checked as the decision's policies were (a receipt is
 * meant to come back as `limitAll` gave it, but a caller may keep it, serialize it, or build
 * one): the PolicyBoundsError a refund answers with, or undefined. Before the store, so a
 * tampered receipt is never a store failure.
 */
/** What a receipt's member id may hold: the limiter's ids, never a log's separators. */
const MEMBER_ID = /^[A-Za-z0-9_.:-]{1,128}$/;

export function receiptIssue(
  receipt: RefundReceipt,
  only: readonly string[] | undefined,
): PolicyBoundsError | undefined {
  // The limiter's record beside the public fields (receipt-state.ts), read as untrusted.
  const { memberId, at, resolved, leased } = (receipt ?? {}) as {
    memberId?: unknown;
    at?: unknown;
    resolved?: readonly ResolvedPolicy[];
    leased?: unknown;
  };
  // A member id is the limiter's own (base64url and base36): a log's separators in one would
  // let a hand-made receipt's search match across entries and patch the wrong one.
  if (typeof memberId !== "string" || !MEMBER_ID.test(memberId) || !Array.isArray(resolved)) {
    return new PolicyBoundsError("refund", 0, "policy", "is not a receipt limitAll returned");
  }
  if (typeof at !== "number" || !Number.isSafeInteger(at) || at < 0) {
    return new PolicyBoundsError("refund", 0, "policy", "is not a receipt limitAll returned");
  }
  if (only !== undefined && !(Array.isArray(only) && only.every((n) => typeof n === "string"))) {
    return new PolicyBoundsError("refund", 0, "policy", "policies must be a list of names");
  }
  for (const [index, policy] of resolved.entries()) {
    const issue = requestIssue({
      ...policy,
      policy: policy?.name,
      key: policy?.clientKey,
    } as unknown as LimitRequest);
    if (issue) return new PolicyBoundsError("refund", index, issue[0], issue[1]);
    // (A request paid from leases never asked the store: its Redis keys are not built yet.)
    if (typeof policy.redisKey !== "string" || (policy.redisKey.length === 0 && !leased)) {
      return new PolicyBoundsError("refund", index, "key", "is not a receipt's Redis key");
    }
  }
  const bounds = storePolicyIssue(resolved);
  if (bounds) return new PolicyBoundsError("refund", bounds.index, bounds.field, bounds.detail);
  return undefined;
}
