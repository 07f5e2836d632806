/**
 * A refund's claim on a usage request's once-gate (keys.ts settleGateKey). A usage rule that
 * counts in a fixed window or a calendar period keeps one count, no entry per request: its settle
 * and its refund would each move the count by what the request holds, and one after the other
 * would give it back twice (or charge a refunded request). The gate makes them one or the other:
 * whichever takes it first acts, the other gives back or charges nothing there. A refund marks it
 * `r`, which the settle answers as unknown (settle-driver.lua.ts).
 */
import { MAX_SETTLE_AGE_MS } from "./caps";
import { runScript, type ScriptClient } from "./script-runner";

// A settle more than MAX_SETTLE_AGE_MS after its admission charges nothing: the gate need not
// outlive that (plus a minute for clocks apart).
const GATE_LIFE_MS = MAX_SETTLE_AGE_MS + 60_000;

const TAKE_GATE_LUA = `if redis.call('SET', KEYS[1], 'r', 'NX', 'PX', ARGV[1]) then return 1 end
return 0`;

/** Whether the refund took the gate (true) or a settle or refund had (false): one command. */
export async function takeRefundGate(client: ScriptClient, gateKey: string): Promise<boolean> {
  return (await runScript<number>(client, TAKE_GATE_LUA, [gateKey], [GATE_LIFE_MS])) === 1;
}
