/**
 * The settle script call: what one admitted request reserved in its usage rules (the weighted
 * log, a fixed window, a calendar period) becomes what it used, once (limiter/settle-receipt.ts
 * calls it; the script and the bound it keeps are in lua/settle-driver.lua.ts).
 */
import { SETTLE_SCRIPT } from "./lua/scripts";
import { requestGateKey } from "./refund";
import { type ScriptCall, type StorePolicy, scriptInputs } from "./script-inputs";
import { runScript, type ScriptClient, StoreReplyError } from "./script-runner";

/** How a settle ended: charged now, charged before (nothing written), or nothing to charge. */
type SettleStatus = "settled" | "already-settled" | "unknown";

export interface SettleAnswer {
  status: SettleStatus;
  /** Per policy, the units charged (negative: given back); zeros unless `settled`. */
  charged: number[];
}

/** A settle: the usage policies as evaluated (costs: the reservations), and what was used. */
export interface SettleCall extends ScriptCall {
  /** The evaluation's `now` (store clock): the window or period the request was counted in. */
  at: number;
  /** The units the request used, per policy (rules may read their usage differently): integers ≥ 0. */
  units: readonly number[];
  /**
   * Per policy, where the admission put its weighted-log entry (evaluate.ts offsets), -1 for
   * unknown: the script then searches the log. @default all -1
   */
  offsets?: readonly number[];
  /**
   * All the request's policies (the receipt's), when the call settles only some: the once-gate
   * is named from them (refund.ts requestGateKey), as every refund of the request names it.
   * @default policies
   */
  request?: readonly StorePolicy[];
}

const STATUS: Record<number, SettleStatus> = { 0: "unknown", 1: "settled", 2: "already-settled" };

/** Settle `call.memberId`'s reservations in `call.policies` to `call.units`, in one script call. */
export async function settle(client: ScriptClient, call: SettleCall): Promise<SettleAnswer> {
  if (call.units.length !== call.policies.length) {
    throw new TypeError("settle: one usage per policy");
  }
  const { keys, args } = scriptInputs("settle", call, [call.at]);
  // What each policy's request used, after the policies (settle-driver.lua.ts).
  args.push(...call.units);
  args.push(...call.policies.map((_, i) => call.offsets?.[i] ?? -1));
  // A fixed window or a period keeps a count, no entry of the request: a key per request gates
  // it, the one its refunds take, whichever of its rules this call settles.
  const counted = call.policies.some((policy) => policy.algorithm !== "sliding-log-weighted");
  const gate = counted && requestGateKey(call.request ?? call.policies, call.memberId);
  if (gate) keys.push(gate);
  const reply = await runScript<unknown>(client, SETTLE_SCRIPT, keys, args);
  const status = Array.isArray(reply) ? STATUS[reply[0] as number] : undefined;
  if (
    !status ||
    !Array.isArray(reply) ||
    reply.length !== 1 + call.policies.length ||
    !reply.every((value) => typeof value === "number" && Number.isFinite(value))
  ) {
    throw new StoreReplyError(`unexpected settle reply: ${JSON.stringify(reply)}`);
  }
  return { status, charged: (reply as number[]).slice(1) };
}
