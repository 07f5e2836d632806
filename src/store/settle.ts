/**
 * The settle script call: what one admitted request reserved in its usage rules' weighted logs
 * becomes what it used (limiter/settle-receipt.ts calls it; the script and the bound it keeps
 * are in lua/weighted-settle.lua.ts).
 */
import { WEIGHTED_SETTLE_LUA } from "./lua/weighted-settle.lua";
import { runScript, type ScriptClient, StoreReplyError } from "./script-runner";

/** How a settle ended: charged now, charged before (nothing written), or nothing to charge. */
type SettleStatus = "settled" | "already-settled" | "unknown";

export interface SettleAnswer {
  status: SettleStatus;
  /** Per log, the units charged (negative: given back); zeros unless `settled`. */
  charged: number[];
}

const STATUS: Record<number, SettleStatus> = { 0: "unknown", 1: "settled", 2: "already-settled" };

/**
 * Settle `memberId`'s entries in the logs at `keys` to what it used, in one script call: `units`
 * per key (parallel to `keys`).
 */
export async function settle(
  client: ScriptClient,
  keys: readonly string[],
  memberId: string,
  units: readonly number[],
): Promise<SettleAnswer> {
  const reply = await runScript<unknown>(
    client,
    WEIGHTED_SETTLE_LUA,
    [...keys],
    [memberId, ...units],
  );
  const status = Array.isArray(reply) ? STATUS[reply[0] as number] : undefined;
  if (
    !status ||
    !Array.isArray(reply) ||
    reply.length !== 1 + keys.length ||
    !reply.every((value) => typeof value === "number" && Number.isFinite(value))
  ) {
    throw new StoreReplyError(`unexpected settle reply: ${JSON.stringify(reply)}`);
  }
  return { status, charged: (reply as number[]).slice(1) };
}
