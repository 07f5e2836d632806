/**
 * A /check body (docs/check-api.md), read strictly: the first wrong field is named and
 * nothing is counted. The fields a body shares with a rule (limit, window, cost, algorithm) are
 * read by the rule's own schema parts, and the client key and request id by config's parts too
 * (config/schema-parts.ts): one definition of each. Only what is /check's own is here: which
 * fields may combine, the rules a body names, and grouping an address for an "ip" rule.
 */
import * as v from "valibot";
import { type ClientIpConfig, DEFAULT_CLIENT_IP } from "../config/client-ip-config";
import { unknownFieldDetail } from "../config/field-suggestion";
import { ADHOC_POLICY_PREFIX } from "../config/limits";
import { PERIOD_NOT_LEASED } from "../config/period-schema";
import { LEASE_NEEDS_LOG, type RuleConfig } from "../config/rule-schema";
import {
  algorithmSchema,
  costFits,
  costSchema,
  limitSchemaOf,
  windowSchema,
} from "../config/schema-parts";
import {
  illFormedString,
  invalid,
  isPlainObject,
  unknownField,
  type Validated,
} from "../config/validation";
import { LONGEST_PERIOD_MS } from "../limiter/calendar-period";
import { DEFAULT_COST } from "../limiter/defaults";
import type { LimitRequest } from "../limiter/types";
import { groupAddress } from "../net/ip-address";
import { ruleRequest } from "../rules/decide";
import { DEFAULT_ALGORITHM, isConcurrency, isLogAlgorithm } from "../store/algorithm";
import { boundsIssue } from "../store/caps";
import { POLICY_NAME } from "../store/keys";
import { readCheckIdentity } from "./check-identity";
import { adhocPeriod, adhocPeriodName } from "./check-period";
import { adhocAlgorithm, checkUsage, usageFieldIssue } from "./check-usage";
import { createPolicyMemo } from "./policy-memo";

const FIELDS = [
  "key",
  "rule",
  "rules",
  "limit",
  "window",
  "cost",
  "algorithm",
  "requestId",
  "lease",
  "period",
  "timezone",
  "anchor",
  "usage",
] as const;

/** Most rules one /check may name (one script call, one key per rule). */
const MAX_RULES_PER_CHECK = 16;

const RULE_NAMES = `must be a non-empty array of at most ${MAX_RULES_PER_CHECK} rule names`;
// The /check-only fields: the rule (or rules) a body names, looked up in the config.
const ruleNameSchema = v.string("must be a string");
const ruleNamesSchema = v.pipe(
  v.array(v.string(RULE_NAMES), RULE_NAMES),
  v.minLength(1, RULE_NAMES),
  v.maxLength(MAX_RULES_PER_CHECK, RULE_NAMES),
  v.check((names) => new Set(names).size === names.length, "names a rule twice"),
);
const optionalCostSchema = v.optional(costSchema, DEFAULT_COST);
const optionalLeaseSchema = v.optional(v.boolean("must be true or false"), false);

/** A valid /check body: one policy or several (decided all or nothing), and a request id. */
export interface CheckRequest {
  /** The policies, in the order the body names them. */
  requests: LimitRequest[];
  /** The body named configured rules (`rule`/`rules`); false: an ad-hoc limit. */
  named: boolean;
  /** The body named `"rules"`: the answer lists every policy's decision. */
  multi: boolean;
  requestId?: string;
  /** Policies of the shadow rules named: decided and reported, never denying. */
  shadow?: ReadonlySet<string>;
  /**
   * Indexes of `requests` keyed by a `"header:<name>"` rule: their key is the raw header value,
   * hashed as the proxy hashes it (keyHeaderRules) before anything is decided.
   */
  headerKeyed?: readonly number[];
  /** A policy counts usage (the weighted log): the answer carries a receipt to settle. */
  usage?: boolean;
}

/** How the proxy groups "ip" keys: /check groups an address it is given the same way. */
export type AddressGrouping = Pick<ClientIpConfig, "ipv4PrefixLength" | "ipv6PrefixLength">;

type Body = Record<string, unknown>;

/** The field refused, in the words of the schema part that refused it. */
function refused(field: string, issues: readonly v.BaseIssue<unknown>[]) {
  return invalid(field, issues[0]?.message ?? "is invalid");
}

/**
 * Validates a parsed /check body strictly: the first wrong field is named; nothing is counted.
 * For a rule keyed on "ip", a key that is an IP address is grouped as the proxy groups it
 * ("2001:db8:1:2::5" → "2001:db8:1:2::/64"), so /check and the proxy share one log; any other
 * key (an already grouped "2001:db8:1:2::/64", a caller's own id) is used as given.
 *
 * @example
 * ```ts
 * const check = parseCheckBody(await request.json(), new Map([[rule.name, rule]]));
 * ```
 */
export function parseCheckBody(
  body: unknown,
  rules: ReadonlyMap<string, RuleConfig>,
  grouping: AddressGrouping = DEFAULT_CLIENT_IP,
  /** The body's JSON text proved every string well-formed (mayHoldLoneSurrogate was false). */
  wellFormed = false,
): Validated<CheckRequest> {
  if (!isPlainObject(body)) return invalid("body", "must be a JSON object");
  // Every string the body carries, before any is used (as a key, an id, a rule name).
  const illFormed = wellFormed ? undefined : illFormedString(body, "body");
  if (illFormed) return illFormed;
  const extra = unknownField(body, FIELDS);
  if (extra) return invalid(extra, unknownFieldDetail(extra, FIELDS));

  const identity = readCheckIdentity(body);
  if (!identity.ok) return identity;
  const { key, requestId } = identity.value;
  const usageField = usageFieldIssue(body);
  if (usageField) return usageField;

  const named = body.rule !== undefined || body.rules !== undefined;
  let requests: Validated<LimitRequest[]>;
  let marks: RuleMarks | undefined;
  if (named) {
    marks = { shadow: new Set(), headerKeyed: [] };
    requests = namedRules(body, key, rules, grouping, marks);
  } else {
    // A fresh request per body: the memo's policy is shared, never handed out.
    const policy = adhocPolicy(body);
    requests = policy.ok ? { ok: true, value: [{ ...policy.value, key }] } : policy;
  }
  if (!requests.ok) return requests;
  const counts = checkUsage(body, named, requests.value);
  if (!counts.ok) return counts;
  const usage = counts.value;
  const value: CheckRequest = {
    requests: requests.value,
    multi: body.rules !== undefined,
    named,
  };
  // Assigned, not spread from `cond ? {…} : {}`: no empty object per field per request.
  if (requestId !== undefined) value.requestId = requestId;
  if (marks && marks.shadow.size > 0) value.shadow = marks.shadow;
  if (marks && marks.headerKeyed.length > 0) value.headerKeyed = marks.headerKeyed;
  if (usage) value.usage = usage;
  return { ok: true, value };
}

/** What namedRules notes of the rules named, besides their requests. */
interface RuleMarks {
  shadow: Set<string>;
  headerKeyed: number[];
}

/** `"rule"` or `"rules"`: configured rules by name, each with its own limit, window, algorithm. */
function namedRules(
  body: Body,
  key: string,
  rules: ReadonlyMap<string, RuleConfig>,
  grouping: AddressGrouping,
  marks: RuleMarks,
): Validated<LimitRequest[]> {
  if (body.rule !== undefined && body.rules !== undefined) {
    return invalid("rules", 'cannot be combined with "rule"');
  }
  const field = body.rule !== undefined ? "rule" : "rules";
  for (const name of [
    "limit",
    "window",
    "algorithm",
    "lease",
    "period",
    "timezone",
    "anchor",
  ] as const) {
    if (body[name] !== undefined) return invalid(name, `cannot be combined with "${field}"`);
  }
  let names: readonly string[];
  if (field === "rule") {
    const rule = v.safeParse(ruleNameSchema, body.rule);
    if (!rule.success) return refused("rule", rule.issues);
    names = [rule.output];
  } else {
    const list = v.safeParse(ruleNamesSchema, body.rules);
    if (!list.success) return refused("rules", list.issues);
    names = list.output;
  }
  // A cost given here applies to every rule named, within each rule's own limit.
  const given = body.cost === undefined ? undefined : v.safeParse(costSchema, body.cost);
  const requests: LimitRequest[] = [];
  for (const name of names) {
    const found = rules.get(name);
    if (!found) return invalid(field, unknownRule(name, rules));
    const ruleCost = given?.success ? given.output : found.cost;
    if ((given && !given.success) || !costFits(ruleCost, found.limit)) {
      return invalid(
        "cost",
        `must be an integer from 1 to the rule's limit (${found.name}: ${found.limit})`,
      );
    }
    const clientKey = found.key === "ip" ? (groupAddress(key, grouping) ?? key) : key;
    if (found.key.startsWith("header:")) marks.headerKeyed.push(requests.length);
    if (found.shadow) marks.shadow.add(found.name);
    requests.push(ruleRequest(found, clientKey, ruleCost));
  }
  // The config keeps each rule, and every rule's log cost together, within the caps: only a
  // `cost` given here can pass them.
  const issue = boundsIssue(
    requests.map((r) => ({
      algorithm: r.algorithm ?? DEFAULT_ALGORITHM,
      limit: r.limit,
      cost: r.cost ?? DEFAULT_COST,
      usage: r.usage,
    })),
  );
  if (issue) return invalid(given !== undefined ? "cost" : field, issue.detail);
  return { ok: true, value: requests };
}

/**
 * The name, and so the Redis key, of an ad-hoc policy: `check.<window>ms.<limit>`. One log per
 * client key, window and limit: a caller who switches a key's limit starts another log instead of
 * making Redis rewrite or re-read the one another limit wrote (a ring of 100 000 read by a call
 * at limit 1 is work bounded by the other limit, not this call's). A configured rule keeps one
 * log across a change of its limit (only a deploy changes it).
 */
export function adhocPolicyName(windowMs: number, limit: number): string {
  return `${ADHOC_POLICY_PREFIX}${windowMs}ms.${limit}`;
}

/**
 * `"limit"` + `"window"`: an ad-hoc policy (limit, window, cost, algorithm, lease), one log per
 * client key, window and limit (adhocPolicyName), read once per distinct set of values.
 */
const adhocPolicy = createPolicyMemo(
  // Every field readAdhocPolicy reads, and no other (a field it reads but the memo does not key
  // on would be answered from another body's read).
  ["algorithm", "limit", "window", "cost", "lease", "period", "timezone", "anchor", "usage"],
  readAdhocPolicy,
);

function readAdhocPolicy(body: Body): Validated<Readonly<Omit<LimitRequest, "key">>> {
  // The algorithm first: the largest limit and cost depend on it. Usage weighs the log.
  const read = v.safeParse(algorithmSchema, body.algorithm);
  if (!read.success) return refused("algorithm", read.issues);
  const counted = adhocAlgorithm(body, read.output);
  if (!counted.ok) return counted;
  const algorithm = { output: counted.value };
  // A slot must be given back under the policy that took it: a configured rule's name.
  if (isConcurrency(algorithm.output)) {
    return invalid(
      "algorithm",
      '"concurrency" is for configured rules only: name one with "rule" (its slot is released with POST /check/release)',
    );
  }
  if (body.limit === undefined)
    return invalid("limit", 'is required (or name a configured "rule")');
  const limit = v.safeParse(limitSchemaOf(algorithm.output), body.limit);
  if (!limit.success) return refused("limit", limit.issues);
  const calendar = adhocPeriod(body, algorithm.output);
  if (calendar && !calendar.ok) return calendar;
  const period = calendar?.value;
  const window = period
    ? ({ success: true, output: LONGEST_PERIOD_MS[period.unit] } as const)
    : v.safeParse(windowSchema, body.window);
  if (!window.success) return refused("window", window.issues);
  const cost = v.safeParse(optionalCostSchema, body.cost);
  if (!cost.success || !costFits(cost.output, limit.output)) {
    return invalid("cost", "must be an integer from 1 to limit");
  }
  const policy = {
    algorithm: period ? ("calendar" as const) : algorithm.output,
    limit: limit.output,
    cost: cost.output,
  };
  const issue = boundsIssue([policy]);
  if (issue) return invalid(issue.field, issue.detail);
  // Leases (docs/leases.md): the logs only; a named rule brings its own setting.
  const lease = v.safeParse(optionalLeaseSchema, body.lease);
  if (!lease.success) return refused("lease", lease.issues);
  if (lease.output && period) return invalid("lease", PERIOD_NOT_LEASED);
  if (lease.output && !isLogAlgorithm(policy.algorithm)) return invalid("lease", LEASE_NEEDS_LOG);
  const name = period
    ? adhocPeriodName(period, policy.limit)
    : adhocPolicyName(window.output, policy.limit);
  if (!POLICY_NAME.test(name)) return invalid("timezone", "is too long a name for an ad-hoc check");
  return {
    ok: true,
    value: Object.freeze({
      policy: name,
      ...(period ? { period } : {}),
      limit: policy.limit,
      windowMs: window.output,
      cost: policy.cost,
      algorithm: policy.algorithm,
      ...(lease.output ? { lease: true } : {}),
    }),
  };
}

/** An unknown rule's detail, naming the configured ones (the first 20) so a typo shows. */
function unknownRule(name: string, rules: ReadonlyMap<string, unknown>): string {
  if (rules.size === 0) return `unknown rule "${name}": no rules are configured`;
  const known = [...rules.keys()].slice(0, 20).map((n) => `"${n}"`);
  const more = rules.size > 20 ? ` and ${rules.size - 20} more` : "";
  return `unknown rule "${name}": the configured rules are ${known.join(", ")}${more}`;
}
