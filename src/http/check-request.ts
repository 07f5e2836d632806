import { parseDuration } from "../config/duration";
import { type ClientIpConfig, DEFAULT_CLIENT_IP, type RuleConfig } from "../config/limiter-config";
import {
  ADHOC_POLICY_PREFIX,
  boundsIssue,
  limitRange,
  MAX_KEY_LENGTH,
  MAX_REQUEST_ID_LENGTH,
  MAX_WINDOW_MS,
  MIN_WINDOW_MS,
  maxLimitOf,
} from "../config/limits";
import {
  illFormedString,
  invalid,
  isIntegerIn,
  isPlainObject,
  unknownField,
  type Validated,
} from "../config/validation";
import type { LimitRequest } from "../limiter/types";
import { groupAddress } from "../rules/client-ip";
import { ruleRequest } from "../rules/decide";
import { ALGORITHMS, DEFAULT_ALGORITHM, isAlgorithm } from "../store/algorithm";

const FIELDS = [
  "key",
  "rule",
  "rules",
  "limit",
  "window",
  "cost",
  "algorithm",
  "requestId",
] as const;

/** Most rules one /check may name (one script call, one key per rule). */
export const MAX_RULES_PER_CHECK = 16;

/** A valid /check body: one policy or several (decided all or nothing), and a request id. */
export interface CheckRequest {
  /** The policies, in the order the body names them. */
  requests: LimitRequest[];
  /** The body named `"rules"`: the answer lists every policy's decision. */
  multi: boolean;
  requestId?: string;
}

/** How the proxy groups "ip" keys: /check groups an address it is given the same way. */
export type AddressGrouping = Pick<ClientIpConfig, "ipv4PrefixLength" | "ipv6PrefixLength">;

/**
 * Validates a parsed /check body strictly: the first wrong field is named; nothing is counted.
 * For a rule keyed on "ip", a key that is an IP address is grouped as the proxy groups it
 * ("2001:db8:1:2::5" → "2001:db8:1:2::/64"), so /check and the proxy share one log; any other
 * key (an already grouped "2001:db8:1:2::/64", a caller's own id) is used as given.
 */
export function parseCheckBody(
  body: unknown,
  rules: ReadonlyMap<string, RuleConfig>,
  grouping: AddressGrouping = DEFAULT_CLIENT_IP,
): Validated<CheckRequest> {
  if (!isPlainObject(body)) return invalid("body", "must be a JSON object");
  // Every string the body carries, before any is used (as a key, an id, a rule name).
  const illFormed = illFormedString(body, "body");
  if (illFormed) return illFormed;
  const extra = unknownField(body, FIELDS);
  if (extra) return invalid(extra, "unknown field");

  const { key, rule, rules: named, limit, window, cost, algorithm, requestId } = body;
  if (typeof key !== "string" || key.length === 0 || key.length > MAX_KEY_LENGTH) {
    return invalid("key", `must be a non-empty string of at most ${MAX_KEY_LENGTH} characters`);
  }
  if (
    requestId !== undefined &&
    (typeof requestId !== "string" ||
      requestId.length === 0 ||
      requestId.length > MAX_REQUEST_ID_LENGTH)
  ) {
    return invalid(
      "requestId",
      `must be a non-empty string of at most ${MAX_REQUEST_ID_LENGTH} characters`,
    );
  }
  const done = (requests: LimitRequest[], multi: boolean): Validated<CheckRequest> => ({
    ok: true,
    value: { requests, multi, ...(requestId !== undefined ? { requestId } : {}) },
  });

  if (rule !== undefined || named !== undefined) {
    if (rule !== undefined && named !== undefined) {
      return invalid("rules", 'cannot be combined with "rule"');
    }
    const field = rule !== undefined ? "rule" : "rules";
    for (const [name, value] of [
      ["limit", limit],
      ["window", window],
      ["algorithm", algorithm],
    ] as const) {
      if (value !== undefined) return invalid(name, `cannot be combined with "${field}"`);
    }
    let names: string[];
    if (rule !== undefined) {
      if (typeof rule !== "string") return invalid("rule", "must be a string");
      names = [rule];
    } else {
      if (
        !Array.isArray(named) ||
        named.length === 0 ||
        named.length > MAX_RULES_PER_CHECK ||
        !named.every((name) => typeof name === "string")
      ) {
        return invalid(
          "rules",
          `must be a non-empty array of at most ${MAX_RULES_PER_CHECK} rule names`,
        );
      }
      if (new Set(named).size !== named.length) return invalid("rules", "names a rule twice");
      names = named as string[];
    }
    const requests: LimitRequest[] = [];
    for (const name of names) {
      const found = rules.get(name);
      if (!found) return invalid(field, `unknown rule "${name}"`);
      const ruleCost = cost === undefined ? found.cost : cost;
      if (!isIntegerIn(ruleCost, 1, found.limit)) {
        return invalid(
          "cost",
          `must be an integer from 1 to the rule's limit (${found.name}: ${found.limit})`,
        );
      }
      const clientKey = found.key === "ip" ? (groupAddress(key, grouping) ?? key) : key;
      requests.push(ruleRequest(found, clientKey, ruleCost));
    }
    // The config keeps each rule, and every rule's log cost together, within the caps: only a
    // `cost` given here can pass them.
    const issue = boundsIssue(
      requests.map((r) => ({
        algorithm: r.algorithm ?? DEFAULT_ALGORITHM,
        limit: r.limit,
        cost: r.cost ?? 1,
      })),
    );
    if (issue) return invalid(cost !== undefined ? "cost" : field, issue.detail);
    return done(requests, rule === undefined);
  }

  // The algorithm first: the largest limit and cost depend on it.
  const checkAlgorithm = algorithm === undefined ? DEFAULT_ALGORITHM : algorithm;
  if (!isAlgorithm(checkAlgorithm)) {
    return invalid("algorithm", `must be one of ${ALGORITHMS.map((a) => `"${a}"`).join(", ")}`);
  }
  if (limit === undefined) return invalid("limit", 'is required (or name a configured "rule")');
  if (!isIntegerIn(limit, 1, maxLimitOf(checkAlgorithm))) {
    return invalid("limit", limitRange(checkAlgorithm));
  }
  const windowMs = parseDuration(window);
  if (windowMs === undefined || windowMs < MIN_WINDOW_MS || windowMs > MAX_WINDOW_MS) {
    return invalid(
      "window",
      `must be a duration from ${MIN_WINDOW_MS} ms to 7 days: an integer of ms, or "500ms", "10s", "1m", "1h", "1d"`,
    );
  }
  const checkCost = cost === undefined ? 1 : cost;
  if (!isIntegerIn(checkCost, 1, limit))
    return invalid("cost", "must be an integer from 1 to limit");
  const issue = boundsIssue([{ algorithm: checkAlgorithm, limit, cost: checkCost }]);
  if (issue) return invalid(issue.field, issue.detail);
  return done(
    [
      {
        policy: `${ADHOC_POLICY_PREFIX}${windowMs}ms`,
        key,
        limit,
        windowMs,
        cost: checkCost,
        algorithm: checkAlgorithm,
      },
    ],
    false,
  );
}
