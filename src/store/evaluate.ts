import { boundsIssue } from "../config/limits";
import type { Algorithm } from "./algorithm";
import { requestRecordKey } from "./keys";
import { EVALUATE_SCRIPTS } from "./lua/scripts";
import { runScript, type ScriptArg, type ScriptClient } from "./script-runner";
import { StoreReplyError, type StoreResult } from "./store-result";

/** One policy (rule) of an evaluation. */
export interface PolicySpec {
  /** Its Redis key: `storageKey(prefix, policy, clientKey)`. */
  key: string;
  algorithm: Algorithm;
  /** Units per window: 1 to MAX_LOG_LIMIT for the sliding log, MAX_LIMIT for the others. */
  limit: number;
  windowMs: number;
  /**
   * Units this request takes in this policy: 1 to limit; the sliding-log costs of one call
   * together at most MAX_LOG_COST (config/limits.ts).
   */
  cost: number;
}

export interface EvaluateRequest {
  /**
   * The policies that apply to the request, decided all or nothing in one script call. For Redis
   * Cluster their keys must share a hash slot — they do when they share the client key (see
   * keys.ts); Upstash and a single Redis take any keys.
   */
  policies: readonly PolicySpec[];
  /** Unique per call (isolate id + counter): log members are `<memberId>.<n>`; keep it for refund. */
  memberId: string;
  /** The caller's clock (ms); omit (or undefined) to use the Redis clock. */
  now?: number | undefined;
  /**
   * A request id (Idempotency-Key, cf-ray…): a retry carrying it within the window is not counted
   * again and gets the original answer (`replayed: true`).
   */
  requestId?: string | undefined;
}

export interface EvaluateResult {
  /** Every policy admitted, and every policy consumed its cost. */
  allowed: boolean;
  /**
   * When denied: index in `policies` of the denying policy with the longest wait (the one
   * Retry-After must honour). Every denying policy has `allowed: false` in `policies`.
   */
  deniedBy: number | undefined;
  /** The answer is the stored original decision of this request id; nothing was counted now. */
  replayed: boolean;
  /** The store's clock when it decided (ms); keep it (`at`) to refund this request. */
  now: number;
  /** ms until the whole request could pass: the longest wait of the denying policies; 0 when allowed. */
  retryAfterMs: number;
  /**
   * Per policy, in order. `allowed` is what the policy alone would do; `remaining` counts this
   * request's cost only when the whole request was admitted (a denied request consumes nothing).
   */
  policies: StoreResult[];
}

/**
 * Decide one request against one or more policies in one script call (EVALSHA; EVAL on
 * NOSCRIPT). Throws on a store failure (the limiter turns that into its fail mode).
 *
 * Redis commands per decision (the script's own; one EVALSHA on the wire): TIME (unless the
 * caller's clock is used), plus per policy — sliding-log: 5 admitted (4 on an empty log), 3
 * denied; fixed-window, sliding-counter, token-bucket: 2 admitted, 1 denied; plus GET (and SET
 * when it stores the answer) with a request id.
 */
export async function evaluate(
  client: ScriptClient,
  request: EvaluateRequest,
): Promise<EvaluateResult> {
  const { policies } = request;
  const { keys, args } = scriptInputs("evaluate", request, []);
  const reply = await runScript<unknown>(client, scriptFor(policies), keys, args);
  return parseReply(reply, policies.length);
}

/**
 * A policy past the caps of config/limits.ts (a limit, a cost, or one call's summed sliding-log
 * cost): the caller's error, thrown before the store is called, so nothing is written.
 */
export class PolicyBoundsError extends RangeError {
  override name = "PolicyBoundsError";
  constructor(
    caller: string,
    /** The offending policy's index in the request. */
    readonly index: number,
    readonly field: "limit" | "cost",
    detail: string,
  ) {
    super(`${caller}: policies[${index}].${field} ${detail}`);
  }
}

/**
 * KEYS and ARGV as every composed script takes them (see lua/scripts.ts): the policies' keys (plus
 * the request-id record), then clock, member id, n, record flag, `extra`, and 4 values per policy.
 */
export function scriptInputs(
  caller: string,
  request: Omit<EvaluateRequest, "policies"> & { policies: readonly PolicySpec[] },
  extra: ScriptArg[],
): { keys: string[]; args: ScriptArg[] } {
  const { policies } = request;
  if (policies.length === 0) throw new TypeError(`${caller}: no policies`);
  // The caps /check and the config enforce, enforced again here for code that builds its own
  // requests (createLimiter, the middleware): refused before Redis is asked to store or do it.
  const issue = boundsIssue(policies);
  if (issue) throw new PolicyBoundsError(caller, issue.index, issue.field, issue.detail);
  const keys = policies.map((policy) => policy.key);
  const withRecord = request.requestId !== undefined;
  if (withRecord) keys.push(requestRecordKey(keys, request.requestId ?? ""));
  const args: ScriptArg[] = [
    request.now ?? "",
    request.memberId,
    policies.length,
    withRecord ? 1 : 0,
    ...extra,
  ];
  for (const policy of policies) {
    args.push(policy.algorithm, policy.limit, policy.windowMs, policy.cost);
  }
  return { keys, args };
}

/** The single-algorithm script when the policies share one (shorter EVAL text), else the mixed one. */
function scriptFor(policies: readonly PolicySpec[]): string {
  const first = policies[0]?.algorithm ?? "sliding-log";
  return policies.every((policy) => policy.algorithm === first)
    ? EVALUATE_SCRIPTS[first]
    : EVALUATE_SCRIPTS.mixed;
}

function parseReply(reply: unknown, n: number): EvaluateResult {
  if (
    !Array.isArray(reply) ||
    reply.length !== 4 + 4 * n ||
    !reply.every((value) => typeof value === "number" && Number.isFinite(value))
  ) {
    throw new StoreReplyError(`unexpected evaluate reply: ${JSON.stringify(reply)}`);
  }
  const values = reply as number[];
  const at = (index: number) => values[index] ?? 0;
  const now = at(3);
  const policies: StoreResult[] = [];
  for (let i = 0; i < n; i++) {
    const base = 4 + 4 * i;
    policies.push({
      allowed: at(base) === 1,
      remaining: at(base + 1),
      reset: at(base + 2),
      retryAfterMs: at(base + 3),
      now,
    });
  }
  const deniedBy = at(1) > 0 ? at(1) - 1 : undefined;
  return {
    allowed: at(0) === 1,
    deniedBy,
    replayed: at(2) === 1,
    now,
    retryAfterMs: deniedBy === undefined ? 0 : (policies[deniedBy]?.retryAfterMs ?? 0),
    policies,
  };
}

export interface PolicyRequest extends PolicySpec {
  memberId: string;
  now?: number | undefined;
  requestId?: string | undefined;
}

/** One policy, any algorithm: `evaluate` with a single policy, answered as that policy's result. */
export async function evaluatePolicy(
  client: ScriptClient,
  request: PolicyRequest,
): Promise<StoreResult & { replayed: boolean }> {
  const { memberId, now, requestId, ...policy } = request;
  const result = await evaluate(client, { policies: [policy], memberId, now, requestId });
  const only = result.policies[0];
  if (!only) throw new StoreReplyError("evaluate reply without a policy");
  return { ...only, replayed: result.replayed };
}
