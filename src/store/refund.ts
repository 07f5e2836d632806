/**
 * The refund script call: give back what one admitted request consumed (the limiter's refund of
 * a receipt calls it; see limiter/refund-receipt.ts).
 */
import { USAGE_ALGORITHMS } from "./algorithm";
import { MAX_SETTLE_AGE_MS } from "./caps";
import { settleGateKey } from "./keys";
import { REFUND_SCRIPT } from "./lua/scripts";
import { type ScriptCall, type StorePolicy, scriptInputs } from "./script-inputs";
import { runScript, type ScriptClient, StoreReplyError } from "./script-runner";

/** A refund: the evaluation's policies (exactly as evaluated: keys, algorithms, limits, windows, costs), member id and request id. */
export interface RefundCall extends ScriptCall {
  /** The evaluation's `now` (store clock): the window the request was counted in. */
  at: number;
  /**
   * The evaluation's request id, if it had one: the refund then happens only if that request was
   * admitted and not refunded yet, and a retry afterwards is decided (and counted) afresh.
   */
  requestId?: string | undefined;
  /**
   * The request's once-gate (refund-driver.lua.ts): taken in the same script, it makes a second
   * refund of the same policies give back nothing, and a refund and a settle of a usage count
   * one or the other.
   */
  gate?: RefundGate | undefined;
}

/** The request's once-gate, and where the call's policies stand in the request. */
interface RefundGate {
  /**
   * keys.ts settleGateKey beside the request's first usage count's key (the key its settle
   * takes), or its first policy's: the same hash slot as the call's keys.
   */
  key: string;
  /** Per policy of the call, its index in the request (0-based). */
  indices: number[];
  /** How many policies the request has. */
  size: number;
  /** How long the gate lives, in ms (refundGateLife). */
  lifeMs: number;
}

/**
 * How long a request's gate must live: while a refund could still give anything back, the
 * longest window of the request's policies (twice it: a sliding counter's previous window still
 * counts), and a usage count's until no settle finds it (a day); at most that day (plus a minute
 * for clocks apart) either way. Of the request's policies, not one call's: the same for every
 * refund of it, so a later one never shortens it.
 */
export function refundGateLife(policies: readonly StorePolicy[]): number {
  const cap = MAX_SETTLE_AGE_MS + 60_000;
  if (policies.some(keepsUsageCount)) return cap;
  const longest = Math.max(0, ...policies.map((policy) => policy.windowMs));
  return Math.min(cap, 2 * longest + 60_000);
}

/**
 * A usage rule's policy that keeps a count (a fixed window, a period), no entry per request: its
 * refund and its settle are one or the other, by the request's once-gate.
 */
function keepsUsageCount(policy: StorePolicy): boolean {
  return (
    policy.usage === true &&
    policy.algorithm !== "sliding-log-weighted" &&
    USAGE_ALGORITHMS.has(policy.algorithm)
  );
}

/**
 * The request's once-gate: beside its first usage count's key, else its first policy's. Named
 * from all the request's policies, never one call's: a settle or a refund of some of them must
 * find the gate every other settle and refund of the same request takes.
 */
export function requestGateKey(
  request: readonly StorePolicy[],
  memberId: string,
): string | undefined {
  const beside = request.find(keepsUsageCount) ?? request[0];
  return beside && settleGateKey(beside.redisKey, memberId);
}

/** What the refund script answers. */
export interface RefundAnswer {
  /** False when a request id was given and there was nothing (left) to refund. */
  refunded: boolean;
  /** Every policy asked was refunded before (the gate's flags): nothing given back again. */
  again?: true;
  /** Units given back, per policy. */
  units: number[];
}

/**
 * Give back what one admitted request consumed, in one script call.
 *
 * - sliding-log: exact — cuts out the request's slots (its time) that are still in the window.
 * - fixed-window / sliding-counter: best effort — takes `cost` off the window the request was
 *   counted in while that window still counts (current, or previous for the counter); never
 *   below zero. Without a request id nothing proves the request was admitted or not yet refunded:
 *   refund each admitted request once.
 * - token-bucket: best effort — lowers the bucket's debt by `cost` tokens, never above full.
 *
 * - a usage rule's count (keepsUsageCount): as fixed-window; a settle came first: nothing.
 *
 * With the request's `gate`, each policy gives back once: a refund again gives nothing and
 * answers `again` (lua/refund-driver.lua.ts).
 *
 * A refund more than MAX_SETTLE_AGE_MS after `at` (on `now`, the clock it runs on) gives
 * nothing back: past that the gate and a reset's tombstone may be gone.
 *
 * Redis commands: TIME (the store's clock; read after the gate); sliding-log ZREM (one per 500
 * units); fixed-window and sliding-counter GET + SET; token-bucket GET + SET (or DEL); with a request id MGET
 * (the record and the reset marks) + DEL of the record; with the gate, GET + SET … PX of it (a
 * refund again, or of counts a settle took: the GET alone).
 */
export async function refund(client: ScriptClient, call: RefundCall): Promise<RefundAnswer> {
  const { keys, args } = scriptInputs("refund", call, [call.at]);
  const gate = call.gate;
  if (gate !== undefined) {
    const counts = call.policies.map((policy) => (keepsUsageCount(policy) ? "1" : "0")).join("");
    const at = gate.indices.map((index) => index + 1).join(",");
    // The gate section before the fingerprint, which stays ARGV's last (request-records.lua.ts).
    const section = ["g", counts, at, String(gate.size), String(gate.lifeMs)];
    args.splice(call.requestId === undefined ? args.length : args.length - 1, 0, ...section);
    keys.push(gate.key);
  }
  const reply = await runScript<unknown>(client, REFUND_SCRIPT, keys, args);
  if (
    !Array.isArray(reply) ||
    reply.length !== 1 + call.policies.length ||
    !reply.every((value) => typeof value === "number" && Number.isFinite(value))
  ) {
    throw new StoreReplyError(`unexpected refund reply: ${JSON.stringify(reply)}`);
  }
  const [refunded, ...units] = reply as number[];
  const answer: RefundAnswer = { refunded: refunded === 1, units };
  if (refunded === 2) answer.again = true;
  return answer;
}
