// @ts-check
// The local bridge's own counters (GET /_bridge/stats): what it billed, as Upstash would.
import { delay } from "../../tools/infra.mjs";

/**
 * @typedef {object} BridgeCounters
 * @property {number} billedCommands
 * @property {number} requests
 * @property {number} scriptCalls
 * @property {number} countedScriptCalls
 * @property {number} scriptInnerCommands
 * @property {number} waiting
 */

/**
 * A bridge's counters now.
 * @param {{ url: string, token: string }} bridge
 * @returns {Promise<BridgeCounters>}
 */
export async function bridgeStats(bridge) {
  const res = await fetch(`${bridge.url}/_bridge/stats`, {
    headers: { authorization: `Bearer ${bridge.token}` },
  });
  if (!res.ok) throw new Error(`${bridge.url}/_bridge/stats answered ${res.status}`);
  return /** @type {BridgeCounters} */ (await res.json());
}

/**
 * A bridge's counters once it has seen no request for 300 ms: work a worker does after its
 * response (releases, settles, in the request's waitUntil) is counted too.
 * @param {{ url: string, token: string }} bridge
 */
export async function quietStats(bridge) {
  let last = await bridgeStats(bridge);
  for (let i = 0; i < 50; i++) {
    await delay(300);
    const next = await bridgeStats(bridge);
    if (next.requests === last.requests && next.waiting === 0) return next;
    last = next;
  }
  return last;
}
