import { parseDuration } from "../config/duration";
import type { RuleConfig } from "../config/limiter-config";
import {
  ADHOC_POLICY_PREFIX,
  MAX_KEY_LENGTH,
  MAX_LIMIT,
  MAX_WINDOW_MS,
  MIN_WINDOW_MS,
} from "../config/limits";
import {
  invalid,
  isIntegerIn,
  isPlainObject,
  unknownField,
  type Validated,
} from "../config/validation";
import type { LimitRequest } from "../limiter/limiter";

const FIELDS = ["key", "rule", "limit", "window", "cost"] as const;

/** Validates a parsed /check body strictly: the first wrong field is named; nothing is counted. */
export function parseCheckRequest(
  body: unknown,
  rules: readonly RuleConfig[],
): Validated<LimitRequest> {
  if (!isPlainObject(body)) return invalid("body", "must be a JSON object");
  const extra = unknownField(body, FIELDS);
  if (extra) return invalid(extra, "unknown field");

  const { key, rule, limit, window, cost } = body;
  if (typeof key !== "string" || key.length === 0 || key.length > MAX_KEY_LENGTH) {
    return invalid("key", `must be a non-empty string of at most ${MAX_KEY_LENGTH} characters`);
  }

  if (rule !== undefined) {
    if (limit !== undefined || window !== undefined) {
      return invalid(limit !== undefined ? "limit" : "window", 'cannot be combined with "rule"');
    }
    if (typeof rule !== "string") return invalid("rule", "must be a string");
    const found = rules.find((candidate) => candidate.name === rule);
    if (!found) return invalid("rule", `unknown rule "${rule}"`);
    const ruleCost = cost === undefined ? found.cost : cost;
    if (!isIntegerIn(ruleCost, 1, found.limit)) {
      return invalid("cost", `must be an integer from 1 to the rule's limit (${found.limit})`);
    }
    return {
      ok: true,
      value: {
        policy: found.name,
        key,
        limit: found.limit,
        windowMs: found.windowMs,
        cost: ruleCost,
        ...(found.failMode ? { failMode: found.failMode } : {}),
      },
    };
  }

  if (limit === undefined) return invalid("limit", 'is required (or name a configured "rule")');
  if (!isIntegerIn(limit, 1, MAX_LIMIT)) {
    return invalid("limit", `must be an integer from 1 to ${MAX_LIMIT}`);
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
  return {
    ok: true,
    value: { policy: `${ADHOC_POLICY_PREFIX}${windowMs}ms`, key, limit, windowMs, cost: checkCost },
  };
}
