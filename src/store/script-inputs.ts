/**
 * What every composed script (lua/scripts.ts) takes: KEYS and ARGV built from the policies of one
 * call, checked against the caps before Redis is asked to store or do anything.
 */

import type { Algorithm } from "./algorithm";
import { storePolicyIssue } from "./caps";
import { encodeKeyPart, requestRecordKey, resetMarkKey } from "./keys";
import { type FenceView, fenceArgs } from "./placement-fence";
import type { ScriptArg } from "./store-clock";

/**
 * One policy (rule) of a call, as the scripts read it. The limiter passes its resolved policy (a
 * superset: name, cache key, fail mode) as it is: no copy per store call.
 */
/** Units one request consumes when it names no cost. */
export const DEFAULT_UNIT_COST = 1;

export interface StorePolicy {
  /** Its Redis key: `storageKey(prefix, policy, clientKey, algorithm)`. */
  redisKey: string;
  algorithm: Algorithm;
  /**
   * Units per window: 1 to MAX_LIMIT (MAX_CONCURRENCY_LIMIT for concurrency; MAX_USAGE_LIMIT
   * for the weighted log and a usage policy: caps.ts maxLimitOf).
   */
  limit: number;
  /**
   * The limit the caller asked, when `limit` is one the limiter derived from it (a moved key
   * during a reshard: the limit less what its old shard still holds, which falls with time). A
   * request id's record is fingerprinted with it, so a retry asking the same matches its
   * record whatever was derived then and now. @default limit
   */
  askedLimit?: number;
  windowMs: number;
  /**
   * Units this request takes in this policy: 1 to limit; the sliding-log costs of one call
   * together at most MAX_RING_COST (caps.ts).
   */
  cost: number;
  /**
   * A usage rule's policy (LimitRequest.usage): its cost is a reservation a settle makes what
   * the request used (settle.ts). @default false
   */
  usage?: boolean;
  /**
   * Read this policy's limit override and key block from the plans hash (plans.ts) in the same
   * script call; needs `name` and `clientKey`, and the call's `plansKey`. @default false
   */
  overrides?: boolean;
  /** The policy (rule) name: the plans hash's fields name it. */
  name?: string;
  /** The client key as given (the plans hash's fields encode it as the Redis key does). */
  clientKey?: string;
  /**
   * A calendar policy's period starts around the caller's clock, ascending (Unix ms): the script
   * counts in the period of them that holds the store's `now` (lua/calendar.lua.ts). The
   * limiter sets them just before it calls the store; required for, and only for, "calendar".
   */
  periodStarts?: readonly number[] | undefined;
  /**
   * The key's own anchor (a plans override's, Unix ms) `periodStarts` were computed with;
   * undefined: the policy's. The script checks it against the override it reads.
   */
  periodAnchor?: number | undefined;
  /**
   * A calendar policy's period as the caller asked it (limiter/calendar-period.ts): a request
   * id's record is fingerprinted with it in the window's place, so a retry asking another period
   * is a conflict, not a replay.
   */
  period?: { unit: string; timezone: string; anchor?: number | undefined } | undefined;
}

/** One call of a composed script: its policies and what they share. */
export interface ScriptCall {
  /**
   * The policies that apply to the request, decided all or nothing in one script call. For Redis
   * Cluster their keys must share a hash slot — they do when they share the client key (see
   * keys.ts); Upstash and a single Redis take any keys.
   */
  policies: readonly StorePolicy[];
  /**
   * Unique per evaluation: log members are `<memberId>.<n>`, a concurrency slot is `<memberId>`
   * (random: limiter/member-id.ts). A request id's record keeps it, and a replay returns it.
   */
  memberId: string;
  /** The caller's clock (ms); omit (or undefined) to use the Redis clock. */
  now?: number | undefined;
  /**
   * A request id (Idempotency-Key, cf-ray…): a retry carrying it within the window is not counted
   * again and gets the original answer (`replayed: true`).
   */
  requestId?: string | undefined;
  /**
   * Stamp the logs' admissions this many ms after the store's now (a lease's units, recorded at
   * the lease's end: see docs/leases.md): 0 to STAMP_AHEAD_MAX_MS, logs only. A refund of them
   * passes `at` = the evaluation's now + this offset. @default 0
   */
  stampOffsetMs?: number | undefined;
  /**
   * The policies' reset marks (keys.ts resetMarkKey), for a call without a request id. To
   * evaluate: "read", and the answer carries the marks it was decided under (a lease keeps them).
   * To refund: those marks, one per policy ('' for none): nothing is given back if any policy
   * was reset since, for the log the reset started holds other requests' units, not this one's.
   */
  resetMarks?: "read" | readonly string[] | undefined;
  /**
   * The plans hash (plans.ts plansKey) the policies with `overrides` read, in the evaluate call
   * only. Without it (or without such a policy) no plan is read: no extra command.
   */
  plansKey?: string | undefined;
  /**
   * The placement fence (placement-fence.ts), in the evaluate call only: the record's key
   * (fenceKey) and what the caller knows of the placement. A sharded limiter sends it with every
   * decision; without it nothing is checked (one store: nothing to place).
   */
  fence?: { key: string; view: FenceView } | undefined;
}

/** The field of a policy a PolicyBoundsError names. */
export type PolicyField =
  | "policy"
  | "period"
  | "key"
  | "algorithm"
  | "limit"
  | "windowMs"
  | "cost"
  | "failMode";

/**
 * A policy the store must not be asked with: a field past its bounds (caps.ts: an algorithm, a
 * window, a limit, a cost, or one call's summed sliding-log cost; the limiter adds the policy
 * name, the client key, the fail mode). The caller's error, thrown before the store is called,
 * so nothing is written.
 *
 * @example
 * ```ts
 * try {
 *   await limiter.limit({ policy: "api", key, limit: requested, windowMs: 60_000 });
 * } catch (error) {
 *   if (error instanceof PolicyBoundsError) return c.json({ field: error.field }, 400);
 *   throw error;
 * }
 * ```
 */
export class PolicyBoundsError extends RangeError {
  override name = "PolicyBoundsError";
  constructor(
    caller: string,
    /** The offending policy's index in the request. */
    readonly index: number,
    readonly field: PolicyField,
    detail: string,
  ) {
    super(`${caller}: policies[${index}].${field} ${detail}`);
  }
}

/**
 * KEYS and ARGV as every composed script takes them: the policies' keys (plus, with a request id,
 * its record and the policies' reset marks), then clock, member id, n, record flag, `extra`, and 4
 * values per policy.
 */
export function scriptInputs(
  caller: string,
  call: ScriptCall,
  extra: ScriptArg[],
): { keys: string[]; args: ScriptArg[] } {
  const { policies } = call;
  if (policies.length === 0) throw new TypeError(`${caller}: no policies`);
  // A backstop for code that calls the store directly (evaluate, refund): the limiter has already
  // refused an over-cap request before its breaker (store-limiter.ts), /check and the config
  // before that, naming the field. A short loop; nothing is sent past it.
  const issue = storePolicyIssue(policies);
  if (issue) throw new PolicyBoundsError(caller, issue.index, issue.field, issue.detail);
  const asked = policies.findIndex(
    ({ askedLimit }) =>
      askedLimit !== undefined && !(Number.isSafeInteger(askedLimit) && askedLimit >= 1),
  );
  if (asked >= 0) {
    throw new PolicyBoundsError(caller, asked, "limit", "asked must be an integer ≥ 1");
  }
  const keys = policies.map((policy) => policy.redisKey);
  const withRecord = call.requestId !== undefined;
  const marks = withRecord ? undefined : call.resetMarks;
  if (Array.isArray(marks) && marks.length !== policies.length) {
    throw new TypeError(`${caller}: one reset mark per policy`);
  }
  if (withRecord) {
    // The record, then each policy key's reset mark: a record a reset came after is forgotten.
    keys.push(requestRecordKey(keys, call.requestId ?? ""));
  }
  if (withRecord || marks !== undefined) {
    for (const policy of policies) keys.push(resetMarkKey(policy.redisKey));
  }
  const args: ScriptArg[] = [
    call.now ?? "",
    call.memberId,
    policies.length,
    withRecord ? 1 : marks !== undefined ? 2 : 0,
    ...extra,
  ];
  for (const policy of policies) {
    args.push(policy.algorithm, policy.limit, windowArg(caller, policy), policy.cost);
  }
  // A refund's marks follow the policies (the evaluate script reads them itself).
  if (Array.isArray(marks)) args.push(...marks);
  if (readsPlans(caller, call)) {
    // The plans section: its hash last in KEYS; names ('' not opted), then encoded client keys.
    keys.push(call.plansKey as string);
    args.push("o");
    for (const policy of policies) args.push(policy.overrides ? (policy.name ?? "") : "");
    for (const policy of policies) {
      args.push(policy.overrides ? encodeKeyPart(policy.clientKey ?? "") : "");
    }
  }
  if (caller === "evaluate" && call.fence !== undefined) {
    // The fence section after the plans', its record the last KEY (fixed offsets from its 'f').
    keys.push(call.fence.key);
    args.push(...fenceArgs(call.fence.view));
  }
  // The record's fingerprint last of all (request-records.lua.ts reads ARGV[#ARGV]).
  if (withRecord) args.push(recordFingerprint(policies));
  return { keys, args };
}

/**
 * What a request id's record is fingerprinted with: per policy `algorithm:limit:window:cost` as
 * the caller asked them (askedLimit over limit; a calendar policy's window its period,
 * `unit@zone@anchor`), joined by ','. The same text the scripts once
 * built from their ARGV, so records written before stay comparable.
 */
function recordFingerprint(policies: readonly StorePolicy[]): string {
  let text = "";
  for (let i = 0; i < policies.length; i++) {
    const p = policies[i] as StorePolicy;
    const window = p.period
      ? `${p.period.unit}@${p.period.timezone}@${p.period.anchor ?? ""}`
      : p.windowMs;
    text += `${i > 0 ? "," : ""}${p.algorithm}:${p.askedLimit ?? p.limit}:${window}:${p.cost}`;
  }
  return text;
}

/** The call reads plans: the evaluate script's plans section is sent. */
export function readsPlans(caller: string, call: ScriptCall): boolean {
  return (
    caller === "evaluate" &&
    call.plansKey !== undefined &&
    call.policies.some((policy) => policy.overrides)
  );
}

/** The window a script reads: ms, or a calendar policy's period starts ("<s0>:<s1>:…|<anchor>"). */
function windowArg(caller: string, policy: StorePolicy): ScriptArg {
  if (policy.algorithm !== "calendar") return policy.windowMs;
  const starts = policy.periodStarts;
  if (
    !Array.isArray(starts) ||
    starts.length < 2 ||
    !starts.every((s, i) => Number.isSafeInteger(s) && (i === 0 || s > (starts[i - 1] as number)))
  ) {
    throw new TypeError(`${caller}: a calendar policy needs its period starts, ascending`);
  }
  return `${starts.join(":")}|${policy.periodAnchor ?? ""}`;
}
