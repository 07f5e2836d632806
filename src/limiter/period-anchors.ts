/**
 * The evaluate call of a request with calendar policies (docs/calendar-quotas.md): their period
 * starts computed around the clock the call runs on, with the key's own anchor when the plans
 * give it one (an override with `anchor`: a customer's billing day).
 *
 * The script reads the override itself (one HMGET, as for any override) but cannot compute
 * periods in a timezone; it checks that the starts sent were computed with the override's anchor
 * and otherwise answers which anchor that is, counting nothing (lua/calendar-plans.lua.ts). This
 * isolate remembers the anchor per key, so only its first call for a key after a change pays a
 * second call; a stale memory costs that call, never a count in the wrong period.
 */
import { type EvaluateAnswer, evaluate } from "../store/evaluate";
import type { ScriptCall } from "../store/script-inputs";
import { type ScriptClient, StoreReplyError } from "../store/script-runner";
import { startsAround } from "./calendar-period";
import type { ResolvedPolicy } from "./resolved-policy";

/** Keys' own anchors this isolate has been told, by prefix and cache key (undefined: none). */
const anchors = new Map<string, number>();
/** Each entry is a few dozen bytes; the oldest go first. */
const MAX_ANCHORS = 10_000;
/** A change of the override between two calls makes a third; more is a store that disagrees. */
const MAX_CALLS = 3;

/**
 * `evaluate`, with each calendar policy's period starts around `at` (the caller's clock, or this
 * isolate's as the estimate of the store's): the period before, the one that holds it and two
 * after, so a store clock a period away either side still finds its own.
 */
export async function evaluateInPeriods(
  client: ScriptClient,
  call: Omit<ScriptCall, "policies"> & { policies: readonly ResolvedPolicy[] },
  at: number,
  prefix: string,
): Promise<EvaluateAnswer> {
  if (!call.policies.some((policy) => policy.period)) return evaluate(client, call);
  for (let calls = 1; ; calls++) {
    for (const policy of call.policies) {
      if (!policy.period) continue;
      const own = policy.overrides ? anchors.get(`${prefix}\n${policy.cacheKey}`) : undefined;
      policy.periodAnchor = own;
      const period = own === undefined ? policy.period : { ...policy.period, anchor: own };
      policy.periodStarts = startsAround(period, at);
    }
    const answer = await evaluate(client, call);
    const told = answer.periodAnchor;
    if (!told) return answer;
    if (calls >= MAX_CALLS) {
      throw new StoreReplyError("the store kept naming another anchor for a calendar policy");
    }
    const policy = call.policies[told.index] as ResolvedPolicy;
    const name = `${prefix}\n${policy.cacheKey}`;
    anchors.delete(name);
    if (told.anchor !== undefined) {
      if (anchors.size >= MAX_ANCHORS) {
        const oldest = anchors.keys().next();
        if (!oldest.done) anchors.delete(oldest.value);
      }
      anchors.set(name, told.anchor);
    }
  }
}
