/**
 * A request id's admission read back from its record, and nothing else: no count read or
 * written, no record written. For a key a reshard moved (limiter/shards/old-replay.ts): its old
 * shard admits nothing after the settle instant, yet holds the records of what it admitted
 * before, and a retry of one of those must be replayed, not decided afresh on the new shard.
 */

import { type EvaluateAnswer, parseReply } from "./evaluate";
import { REQUEST_RECORDS_LUA } from "./lua/request-records.lua";
import { type ScriptCall, scriptInputs } from "./script-inputs";
import { runScript, type ScriptClient } from "./script-runner";

/**
 * The evaluate script's KEYS and ARGV (a request id's record, its reset marks, the fingerprint
 * last): a record replayed as the evaluate script replays it, only when it says "admitted" and
 * matches the call's fingerprint; else 0. Commands: one MGET.
 */
const REPLAY_SCRIPT = `${REQUEST_RECORDS_LUA}
local n = tonumber(ARGV[3])
local stored, _, fp, member = records().read(n)
if not stored or records().conflict(fp, n) then return 0 end
local out = {}
for v in string.gmatch(stored, '[^,]+') do out[#out + 1] = tonumber(v) end
if out[1] ~= 1 then return 0 end
out[3] = 1
out[#out + 1] = member or ''
return out
`;

/**
 * The replayed admission of `call.requestId` over `call.policies` (their Redis keys set), or
 * undefined when the store holds none (no record, a denial, a reset since, other parameters).
 * Throws on a store failure.
 */
export async function replayRecord(
  client: ScriptClient,
  call: ScriptCall & { requestId: string },
): Promise<EvaluateAnswer | undefined> {
  const { keys, args } = scriptInputs("evaluate", { ...call, plansKey: undefined }, [0]);
  const reply = await runScript<unknown>(client, REPLAY_SCRIPT, keys, args);
  if (reply === 0) return undefined;
  return parseReply(reply, call.policies.length, 0, false, false);
}
