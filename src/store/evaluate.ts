/**
 * src/store/: all of Redis, and nothing but Redis. This folder owns the Lua scripts (lua/, one
 * fragment per algorithm; the list in algorithm.ts), the script calls (this file, refund.ts,
 * peek-reset.ts) and the KEYS/ARGV they take (script-inputs.ts), the retry contract
 * (script-runner.ts: EVALSHA, EVAL on NOSCRIPT, within one deadline; with-deadline.ts), the key
 * layout (keys.ts), the caps on what one call may make Redis store and do (caps.ts) and the
 * Upstash client (upstash-client.ts). It knows nothing of HTTP, rules or decisions, and imports
 * nothing above it: only @upstash/redis and src/digest.ts (the scripts' SHA-1).
 *
 * This file: the evaluate script call. Decide one request against its policies, all or
 * nothing, and read the reply into one answer per policy.
 */
import { isLogAlgorithm } from "./algorithm";
import { STAMP_AHEAD_MAX_MS } from "./keys";
import { EVALUATE_SCRIPTS } from "./lua/scripts";
import { type FenceRefusal, fenceRefusalOf } from "./placement-fence";
import { readsPlans, type ScriptCall, type StorePolicy, scriptInputs } from "./script-inputs";
import { runScript, type ScriptClient, StoreReplyError } from "./script-runner";

/** One policy's answer in the evaluate script's reply (peek answers the same shape). */
export interface PolicyAnswer {
  allowed: boolean;
  remaining: number;
  /**
   * Store-clock ms when capacity next frees: when allowed, when the next unit frees (the window's
   * end for fixed-window; `now` when nothing is in use); when denied, when this cost fits.
   */
  reset: number;
  /** ms from the store's `now` until a denied request of this cost could pass (0 when allowed). */
  retryAfterMs: number;
  /** The store's clock when it decided (ms). */
  now: number;
  /** The limit it decided by: a limit override's when the call read plans, else absent. */
  limit?: number;
}

/** The evaluate script's whole answer for one request. */
export interface EvaluateAnswer {
  /** Every policy admitted, and every policy consumed its cost. */
  allowed: boolean;
  /**
   * When denied: index in `policies` of the denying policy with the longest wait (the one
   * Retry-After must honour). Every denying policy has `allowed: false` in `policies`.
   */
  deniedBy: number | undefined;
  /** The answer is the stored original decision of this request id; nothing was counted now. */
  replayed: boolean;
  /**
   * A replay's: the member id the original was decided under (its concurrency slot's id); ''
   * when it took no slot, or for a record written before records kept it.
   */
  member?: string;
  /** The store's clock when it decided (ms). */
  now: number;
  /**
   * When the logs' admissions were stamped: `now + stampOffsetMs` (`now` without an offset). Keep it
   * (`at`) to refund this request: the ring finds the request's admissions by this time.
   */
  stamp: number;
  /** ms until the whole request could pass: the longest wait of the denying policies; 0 when allowed. */
  retryAfterMs: number;
  /**
   * Per policy, in order. `allowed` is what the policy alone would do; `remaining` counts this
   * request's cost only when the whole request was admitted (a denied request consumes nothing).
   */
  policies: PolicyAnswer[];
  /**
   * An admission with a weighted-log policy: per policy, where its entry went among the log's
   * entries (-1: not a weighted log). Its settle writes there (lua/weighted-settle.lua.ts).
   */
  offsets?: number[];
  /**
   * Set when the request id's record was decided with other parameters than this call's: nothing
   * was decided or counted (`allowed` false, `policies` empty). See RecordConflict.
   */
  conflict?: RecordConflict;
  /**
   * Set when a calendar policy's key has its own anchor in the plans (an override's) other than
   * the one its period starts were computed with (StorePolicy.periodAnchor): nothing was decided
   * or counted. `anchor`: the override's (Unix ms), undefined for none (the policy's own).
   */
  periodAnchor?: { index: number; anchor: number | undefined };
  /**
   * With `resetMarks: "read"`: each policy's reset mark when it was decided ('' for none), for a
   * refund of it to carry (ScriptCall.resetMarks).
   */
  resetMarks?: string[];
  /**
   * Set when a policy's key is blocked (plans.ts): nothing was read, decided or counted
   * (`allowed` false, `policies` empty).
   */
  blocked?: KeyBlock;
  /**
   * Set when the shard refused the caller's placement view (placement-fence.ts): nothing was
   * read, decided or counted (`allowed` false, `policies` empty).
   */
  fenced?: FenceRefusal;
}

/** A live key block the evaluate script met. */
export interface KeyBlock {
  /** Index in the call's policies. */
  index: number;
  /** Store-clock ms when the block ends; 0: until it is removed. */
  until: number;
}

/** The fields of a policy a request id's record remembers, in the record's order. */
const RECORDED_FIELDS = ["algorithm", "limit", "windowMs", "cost"] as const;

/**
 * A request id already decided with other parameters: the first policy and field that differ,
 * with the recorded and the asked value (as the script saw them: strings). A retry must send the
 * same request; replaying the first answer would admit the second request for free, and
 * deciding it afresh would count a genuine retry twice.
 */
interface RecordConflict {
  /** Index in the call's policies. */
  index: number;
  field: (typeof RECORDED_FIELDS)[number];
  recorded: string;
  asked: string;
}

/**
 * Decide one request against one or more policies in one script call (EVALSHA; EVAL on
 * NOSCRIPT). Throws on a store failure (the limiter turns that into its fail mode). Keep the
 * call's memberId to refund it.
 *
 * Redis commands per decision (the script's own; one EVALSHA on the wire): TIME (unless the
 * caller's clock is used), plus per policy — sliding-log (ring): 2 admitted (GET, SET), 1 denied
 * up to limit 248, else 4–5 admitted and 2–3 denied (GETRANGE/SETRANGE); fixed-window, sliding-counter, token-bucket: 2 admitted, 1 denied; plus, with a
 * request id, one MGET (the record and the policies' reset marks) and SET when it stores the answer;
 * plus, when a policy reads plans (`overrides` and the call's `plansKey`), one HMGET for all of them;
 * plus, with a placement fence (a sharded limiter's call), one GET (a SET when it writes the record).
 */
export async function evaluate(client: ScriptClient, call: ScriptCall): Promise<EvaluateAnswer> {
  const { policies } = call;
  const ahead = call.stampOffsetMs ?? 0;
  if (!Number.isInteger(ahead) || ahead < 0 || ahead > STAMP_AHEAD_MAX_MS) {
    throw new RangeError(
      `evaluate: stampOffsetMs must be an integer from 0 to ${STAMP_AHEAD_MAX_MS}`,
    );
  }
  if (ahead > 0 && !policies.every((policy) => isLogAlgorithm(policy.algorithm))) {
    // The O(1) algorithms keep counts, not times: a future stamp means nothing to them.
    throw new TypeError("evaluate: stampOffsetMs applies to the sliding log only");
  }
  const { keys, args } = scriptInputs("evaluate", call, [ahead]);
  const reply = await runScript<unknown>(client, scriptFor(policies), keys, args);
  const marks = call.resetMarks === "read" && call.requestId === undefined;
  const plans = readsPlans("evaluate", call);
  if (call.fence !== undefined) {
    const fenced = fenceRefusalOf(reply);
    if (fenced) return fencedAnswer(fenced);
  }
  const logs = policies.some((policy) => policy.algorithm === "sliding-log-weighted");
  return parseReply(reply, policies.length, ahead, marks, plans, logs);
}

/** The single-algorithm script when the policies share one (shorter EVAL text), else the mixed one. */
function scriptFor(policies: readonly StorePolicy[]): string {
  const first = policies[0]?.algorithm ?? "sliding-log";
  return policies.every((policy) => policy.algorithm === first)
    ? EVALUATE_SCRIPTS[first]
    : EVALUATE_SCRIPTS.mixed;
}

export function parseReply(
  reply: unknown,
  n: number,
  ahead: number,
  marks: boolean,
  plans: boolean,
  logs = false,
): EvaluateAnswer {
  if (Array.isArray(reply) && reply.length === 5 && reply[0] === -1) return conflictAnswer(reply);
  if (plans && Array.isArray(reply) && reply.length === 4 && reply[0] === -2) {
    return blockedAnswer(reply, n);
  }
  if (plans && Array.isArray(reply) && reply.length === 3 && reply[0] === -4) {
    return anchorAnswer(reply, n);
  }
  const numbers = 4 + 4 * n;
  const strings = marks ? n : 0;
  // A replay ends with the member id its record was decided under.
  const replay = Array.isArray(reply) && reply[2] === 1 ? 1 : 0;
  const limits = numbers + strings + (plans ? n : 0);
  // An admission's weighted-log offsets end it (a replay's member id in their place).
  const offsets = logs && !replay && Array.isArray(reply) && reply[0] === 1 ? n : 0;
  if (
    !Array.isArray(reply) ||
    reply.length !== limits + replay + offsets ||
    !reply.every((value, i) =>
      (i < numbers || i >= numbers + strings) && i < limits + offsets
        ? typeof value === "number" && Number.isFinite(value)
        : typeof value === "string",
    )
  ) {
    throw new StoreReplyError(`unexpected evaluate reply: ${JSON.stringify(reply)}`);
  }
  const values = reply as number[];
  const at = (index: number) => values[index] ?? 0;
  const now = at(3);
  const policies: PolicyAnswer[] = [];
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
  const answer: EvaluateAnswer = {
    allowed: at(0) === 1,
    deniedBy,
    replayed: at(2) === 1,
    now,
    stamp: now + ahead,
    retryAfterMs: deniedBy === undefined ? 0 : (policies[deniedBy]?.retryAfterMs ?? 0),
    policies,
  };
  if (marks) answer.resetMarks = (reply as unknown[]).slice(numbers, numbers + n) as string[];
  if (replay) answer.member = reply[limits] as string;
  if (offsets) answer.offsets = values.slice(limits, limits + n);
  if (plans) {
    for (let i = 0; i < n; i++) {
      (policies[i] as PolicyAnswer).limit = at(numbers + strings + i);
    }
  }
  return answer;
}

/** The script's block reply: {-2, policy (1-based), until, now}. */
function blockedAnswer(reply: unknown[], n: number): EvaluateAnswer {
  const [, policy, until, now] = reply;
  if (
    typeof policy !== "number" ||
    policy < 1 ||
    policy > n ||
    typeof until !== "number" ||
    typeof now !== "number"
  ) {
    throw new StoreReplyError(`unexpected evaluate reply: ${JSON.stringify(reply)}`);
  }
  return {
    allowed: false,
    deniedBy: policy - 1,
    replayed: false,
    now,
    stamp: now,
    retryAfterMs: until === 0 ? 0 : Math.max(0, until - now),
    policies: [],
    blocked: { index: policy - 1, until },
  };
}

/** An answer that decided nothing, before its reason (a fence, an anchor, a conflict): fresh each time. */
const undecided = (): EvaluateAnswer => ({
  allowed: false,
  deniedBy: undefined,
  replayed: false,
  now: 0,
  stamp: 0,
  retryAfterMs: 0,
  policies: [],
});

/** The script's anchor reply: {-4, policy (1-based), the override's anchor ('' for none)}. */
function anchorAnswer(reply: unknown[], n: number): EvaluateAnswer {
  const [, policy, given] = reply;
  // (The client reads a number-like string as a number.)
  const anchor = given === "" ? undefined : Number(given);
  if (typeof policy !== "number" || policy < 1 || policy > n || Number.isNaN(anchor)) {
    throw new StoreReplyError(`unexpected evaluate reply: ${JSON.stringify(reply)}`);
  }
  return {
    ...undecided(),
    periodAnchor: { index: policy - 1, anchor },
  };
}

/** The fence's refusal: nothing decided. */
function fencedAnswer(fenced: FenceRefusal): EvaluateAnswer {
  return {
    ...undecided(),
    fenced,
  };
}

/** The script's conflict reply: {-1, policy (1-based), field (1-based), recorded, asked}. */
function conflictAnswer(reply: unknown[]): EvaluateAnswer {
  const [, policy, field, recorded, asked] = reply;
  const name = typeof field === "number" ? RECORDED_FIELDS[field - 1] : undefined;
  if (typeof policy !== "number" || policy < 1 || name === undefined) {
    throw new StoreReplyError(`unexpected evaluate reply: ${JSON.stringify(reply)}`);
  }
  return {
    ...undecided(),
    conflict: { index: policy - 1, field: name, recorded: String(recorded), asked: String(asked) },
  };
}

/** One policy's call: a StorePolicy plus what a ScriptCall shares. */
export interface PolicyCall extends StorePolicy, Omit<ScriptCall, "policies"> {}

/** One policy, any algorithm: `evaluate` with a single policy, answered as that policy's answer. */
export async function evaluatePolicy(
  client: ScriptClient,
  call: PolicyCall,
): Promise<PolicyAnswer & { replayed: boolean }> {
  const { memberId, now, requestId, ...policy } = call;
  const answer = await evaluate(client, { policies: [policy], memberId, now, requestId });
  const only = answer.policies[0];
  if (!only) throw new StoreReplyError("evaluate reply without a policy");
  return { ...only, replayed: answer.replayed };
}
