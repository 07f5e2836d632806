import type { Clock, FailMode } from "../limiter/limiter";
import { parseDuration } from "./duration";
import {
  ADHOC_POLICY_PREFIX,
  MAX_LIMIT,
  MAX_WINDOW_MS,
  MIN_WINDOW_MS,
  POLICY_NAME,
} from "./limits";
import { invalid, isIntegerIn, isPlainObject, unknownField, type Validated } from "./validation";

export interface RuleConfig {
  name: string;
  limit: number;
  windowMs: number;
  /** @default 1 */
  cost: number;
  /** Where the client key comes from: "ip", "header:<name>" or "global". @default "ip" */
  key: string;
  /** Overrides the global fail mode for this rule. */
  failMode?: FailMode;
  match?: Record<string, unknown>;
}

export interface LimiterConfig {
  rules: RuleConfig[];
  /** Store call timeout. @default 500 */
  timeoutMs: number;
  /** @default "open" */
  failMode: FailMode;
  /** Redis key prefix. @default "edge-limiter" */
  prefix: string;
  /** @default "redis" */
  clock: Clock;
}

export const DEFAULT_TIMEOUT_MS = 500;
const MAX_TIMEOUT_MS = 30_000;

const TOP_LEVEL = ["rules", "timeoutMs", "failMode", "prefix", "clock"] as const;
const RULE_FIELDS = ["name", "match", "limit", "window", "key", "cost", "failMode"] as const;

/**
 * LIMITER_CONFIG: a JSON string (from `npm start`, or a wrangler var) or an object (a TOML table
 * in wrangler.toml). Validated once per isolate; the first wrong field is named.
 */
export function parseLimiterConfig(raw: unknown): Validated<LimiterConfig> {
  let input = raw ?? {};
  if (typeof input === "string") {
    try {
      input = input.trim() === "" ? {} : JSON.parse(input);
    } catch (error) {
      return invalid("LIMITER_CONFIG", `not valid JSON: ${(error as Error).message}`);
    }
  }
  if (!isPlainObject(input)) return invalid("LIMITER_CONFIG", "must be an object");
  const extra = unknownField(input, TOP_LEVEL);
  if (extra) return invalid(extra, "unknown field");

  const { rules = [], timeoutMs = DEFAULT_TIMEOUT_MS, failMode = "open" } = input;
  const { prefix = "edge-limiter", clock = "redis" } = input;
  if (!isIntegerIn(timeoutMs, 1, MAX_TIMEOUT_MS)) {
    return invalid("timeoutMs", `must be an integer from 1 to ${MAX_TIMEOUT_MS}`);
  }
  if (failMode !== "open" && failMode !== "closed") {
    return invalid("failMode", 'must be "open" or "closed"');
  }
  if (typeof prefix !== "string" || !/^[A-Za-z0-9_.:-]{1,64}$/.test(prefix)) {
    return invalid("prefix", "must be 1-64 characters of [A-Za-z0-9_.:-]");
  }
  if (clock !== "redis" && clock !== "caller") {
    return invalid("clock", 'must be "redis" or "caller"');
  }
  if (!Array.isArray(rules)) return invalid("rules", "must be an array");

  const parsed: RuleConfig[] = [];
  for (const [index, rule] of rules.entries()) {
    const result = parseRule(rule, `rules[${index}]`);
    if (!result.ok) return result;
    if (parsed.some((other) => other.name === result.value.name)) {
      return invalid(`rules[${index}].name`, `duplicate rule name "${result.value.name}"`);
    }
    parsed.push(result.value);
  }
  return { ok: true, value: { rules: parsed, timeoutMs, failMode, prefix, clock } };
}

function parseRule(rule: unknown, at: string): Validated<RuleConfig> {
  if (!isPlainObject(rule)) return invalid(at, "must be an object");
  const extra = unknownField(rule, RULE_FIELDS);
  if (extra) return invalid(`${at}.${extra}`, "unknown field");
  const { name, limit, window, cost = 1, key = "ip", failMode, match } = rule;
  if (typeof name !== "string" || !POLICY_NAME.test(name)) {
    return invalid(`${at}.name`, "must be 1-64 characters of [A-Za-z0-9_.-]");
  }
  if (name.startsWith(ADHOC_POLICY_PREFIX)) {
    return invalid(
      `${at}.name`,
      `must not start with "${ADHOC_POLICY_PREFIX}" (reserved for ad-hoc checks)`,
    );
  }
  if (!isIntegerIn(limit, 1, MAX_LIMIT)) {
    return invalid(`${at}.limit`, `must be an integer from 1 to ${MAX_LIMIT}`);
  }
  const windowMs = parseDuration(window);
  if (windowMs === undefined || windowMs < MIN_WINDOW_MS || windowMs > MAX_WINDOW_MS) {
    return invalid(
      `${at}.window`,
      'must be a duration ("500ms", "10s", "1m", "1h", "1d" or ms) up to 7d',
    );
  }
  if (!isIntegerIn(cost, 1, limit))
    return invalid(`${at}.cost`, "must be an integer from 1 to limit");
  if (typeof key !== "string" || !/^(ip|global|header:[A-Za-z0-9!#$%&'*+.^_`|~-]+)$/.test(key)) {
    return invalid(`${at}.key`, 'must be "ip", "global" or "header:<name>"');
  }
  if (failMode !== undefined && failMode !== "open" && failMode !== "closed") {
    return invalid(`${at}.failMode`, 'must be "open" or "closed"');
  }
  if (match !== undefined && !isPlainObject(match))
    return invalid(`${at}.match`, "must be an object");
  return {
    ok: true,
    value: {
      name,
      limit,
      windowMs,
      cost,
      key,
      ...(failMode ? { failMode } : {}),
      ...(match ? { match } : {}),
    },
  };
}
