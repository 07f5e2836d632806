/**
 * A usage request's settle on the HTTP surfaces (docs/usage.md): `c.get("rateLimit").settle(units)`
 * for an app that knows what it used, and the surface's own settle from the response (the proxy's
 * and the middleware's: readUsage, as the body passes to the client) when the app did not. Once
 * per request: a second call answers the first's outcome.
 */
import type { RuleConfig } from "../config/rule-schema";
import type { UsageSpec } from "../config/usage-schema";
import type { Limiter } from "../limiter/limiter-api";
import { isUsage, USAGE_RANGE } from "../limiter/settle-receipt";
import type { Decision, SettleOutcome, SettleUnits, WaitUntil } from "../limiter/types";
import type { RulesOutcome } from "../rules/outcome";
import { readUsage } from "./usage-reader";

/** What settling a request does, once; `settled` says whether it was asked for yet. */
export interface UsageSettler {
  /** One figure for every usage rule (what an app reports), or one per rule by name. */
  settle(units: SettleUnits): Promise<SettleOutcome>;
  readonly settled: boolean;
  /** The request's usage rules, each with its spec's identity: what settleFromResponse reads. */
  readonly usage: readonly UsageRule[];
}

/** A usage rule and its spec; `id` is the same for equal specs, which share one reading. */
interface UsageRule {
  rule: RuleConfig;
  spec: UsageSpec;
  id: string;
}

// A spec's identity, taken once per spec object, not per request: a configuration's specs live
// as long as it does (a middleware rule's per-request copy keeps its rule's spec object).
const specIds = new WeakMap<UsageSpec, string>();

function specId(spec: UsageSpec): string {
  let id = specIds.get(spec);
  if (id === undefined) {
    id = JSON.stringify(spec);
    specIds.set(spec, id);
  }
  return id;
}

/** The usage rules among a request's rules; undefined, with nothing built, when there are none. */
function usageRules(rules: readonly RuleConfig[]): UsageRule[] | undefined {
  let found: UsageRule[] | undefined;
  for (const rule of rules) {
    if (!rule.usage) continue;
    found ??= [];
    found.push({ rule, spec: rule.usage, id: specId(rule.usage) });
  }
  return found;
}

const REFUSED = `usage ${USAGE_RANGE}`;

const RANK: Record<SettleOutcome["status"], number> = {
  failed: 3,
  settled: 2,
  "already-settled": 1,
  unknown: 0,
};

/** The settler of an admitted request counted in a usage rule; undefined for any other. */
export function usageSettler(
  outcome: RulesOutcome,
  rules: readonly RuleConfig[],
  limiter: Limiter,
): UsageSettler | undefined {
  const receipts = outcome.receipts;
  if (!outcome.allowed || !receipts) return undefined;
  const usage = usageRules(rules);
  if (!usage) return undefined;
  let done: Promise<SettleOutcome> | undefined;
  const settle = async (units: SettleUnits): Promise<SettleOutcome> => {
    const outcomes = await Promise.all(receipts.map((receipt) => limiter.settle(receipt, units)));
    const result: SettleOutcome = { status: "unknown", policies: [], charged: [] };
    for (const one of outcomes) {
      result.policies.push(...one.policies);
      result.charged.push(...one.charged);
      if (RANK[one.status] > RANK[result.status]) result.status = one.status;
      if (one.error !== undefined) result.error ??= one.error;
    }
    // What the headers say after it: the budget left, in units.
    if (result.status === "settled") outcome.decisions = charged(outcome.decisions, result);
    return result;
  };
  return {
    settle(units) {
      // Units a settle refuses change nothing in the store: they do not use up the request's
      // one settle, which a right figure (the app's next call, or the body's) still makes.
      const valid =
        typeof units === "object" ? Object.values(units).every(isUsage) : isUsage(units);
      if (!valid) {
        return Promise.resolve({ status: "failed", policies: [], charged: [], error: REFUSED });
      }
      // A settle the store did not take (`failed`: nothing is known to be charged) does not use
      // up the request's one settle either: the app's next call, or the body's reading, retries.
      done ??= settle(units).then((result) => {
        if (result.status === "failed") done = undefined;
        return result;
      });
      return done;
    },
    get settled() {
      return done !== undefined;
    },
    usage,
  };
}

/** Each settled rule's decision with what was charged (or given back) off its remaining. */
function charged(decisions: Decision[], result: SettleOutcome): Decision[] {
  return decisions.map((decision) => {
    const i = result.policies.indexOf(decision.policy);
    const units = i < 0 ? 0 : (result.charged[i] ?? 0);
    if (units === 0) return decision;
    const remaining = Math.min(decision.limit, Math.max(0, decision.remaining - units));
    return { ...decision, remaining };
  });
}

/** The response to hand to the client, and whether its usage is read as its body passes. */
export interface SettlingResponse {
  response: Response;
  /** True while the body is read for its usage: its end (or its client's going) settles it. */
  reading: boolean;
}

/**
 * After the origin or the app answered: settle from its response when nothing settled it yet,
 * each usage rule by its own spec (rules that read the same spec share one reading). A header is
 * read and settled at once (awaited, as a refund is: the headers and the client's next request
 * see it). A JSON body or an event stream is read as it passes to the client (usage-reader.ts:
 * nothing buffered; several specs, one pass-through reader each), and settled when it ends, kept
 * alive by `waitUntil`; the headers then show the budget left after the reservation. No usage
 * read for a rule (no header, no field, the body failed or its client went before the usage
 * event): its reservation stands; a usage rule whose `refundOn` gave a 5xx back is not read. A client gone after the
 * usage event is charged that usage: the reader answers what the complete events reported.
 */
export async function settleFromResponse(
  settler: UsageSettler,
  response: Response,
  context: { signal?: AbortSignal | undefined; waitUntil?: WaitUntil | undefined },
): Promise<SettlingResponse> {
  if (settler.settled) return { response, reading: false };
  // A usage rule that gives a 5xx back was refunded whole (refundOnServerError): nothing to read
  // for it. The others are charged what the answer reports, 5xx or not.
  const refunded = (rule: RuleConfig) => response.status >= 500 && rule.refundOn === "5xx";
  // One reading per distinct spec, in the order the rules name them, each passing the body on to
  // the next, with the names of the rules it charges.
  const groups: { id: string; names: string[]; usage: Promise<number | undefined> }[] = [];
  let skipped = false;
  let passing = response;
  for (const { rule, spec, id } of settler.usage) {
    if (refunded(rule)) {
      skipped = true;
      continue;
    }
    let group = groups.find((g) => g.id === id);
    if (!group) {
      const reading = readUsage(passing, spec, { signal: context.signal });
      passing = reading.response;
      group = { id, names: [], usage: reading.usage };
      groups.push(group);
    }
    group.names.push(rule.name);
  }
  // Never rejects: a failed settle leaves the reservations standing, as a store down does.
  const settling = Promise.all(groups.map((group) => group.usage)).then(
    async (read) => {
      // One figure for every usage rule, unless some were skipped or read differently.
      if (groups.length === 1 && !skipped) {
        if (read[0] !== undefined) await settler.settle(read[0]);
        return;
      }
      const perRule: Record<string, number> = {};
      groups.forEach(({ names }, i) => {
        const units = read[i];
        if (units !== undefined) for (const name of names) perRule[name] = units;
      });
      if (Object.keys(perRule).length > 0) await settler.settle(perRule);
    },
    () => {},
  );
  // The response handed back as it is: its usage is known now (a header) or never (nothing to
  // read), and the readers have resolved already.
  if (passing === response) {
    await settling;
    return { response, reading: false };
  }
  // Registered before the response is handed over: once it has been, only a pending waitUntil
  // keeps the request's context (and so this settle) alive when the client goes.
  context.waitUntil?.(settling);
  return { response: passing, reading: true };
}
