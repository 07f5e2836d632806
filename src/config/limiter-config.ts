import * as v from "valibot";
import { type ClockSource, DEFAULT_LIMITER_TIMEOUT_MS, type FailMode } from "../limiter/types";
import { ALGORITHMS, type Algorithm, DEFAULT_ALGORITHM } from "../store/algorithm";
import { firstIssue } from "./config-issue";
import { parseDuration } from "./duration";
import {
  ADHOC_POLICY_PREFIX,
  boundsIssue,
  MAX_LIMIT,
  MAX_WINDOW_MS,
  MIN_WINDOW_MS,
  POLICY_NAME,
} from "./limits";
import { type ResilienceConfig, resilienceEntries } from "./resilience-config";
import { integerIn, plainObject } from "./schema-parts";
import { illFormedString, invalid, isPlainObject, type Validated } from "./validation";

/** What a rule does for a request that lacks its key material (no IP, no such header). */
export type MissingKeyOutcome = "shared" | "skip" | "deny";

/** Which requests a rule applies to. Both parts must fit; an absent part fits everything. */
export interface RuleMatch {
  /** Path patterns ("/api/*", "/login", "/users/:id"); any one may fit. @default every path */
  paths?: string[];
  /** Upper-case methods. @default every method */
  methods?: string[];
  /**
   * Compare literal path segments case-sensitively. Off by default: many origins (Express,
   * ASP.NET, IIS, S3 sites behind rewrites) serve "/Login" as "/login", and a limit that a
   * client can dodge by changing case protects nothing. Counting "/LOGIN" on an origin that
   * 404s it costs one unit; missing it on one that serves it is a bypass.
   * @default false
   */
  caseSensitive?: boolean;
}

export interface RuleConfig {
  name: string;
  limit: number;
  windowMs: number;
  /** @default 1 */
  cost: number;
  /** Where the client key comes from: "ip", "header:<name>" (lower-cased) or "global". @default "ip" */
  key: string;
  /** Overrides the global fail mode for this rule. */
  failMode?: FailMode;
  /** Decide, log and add headers, but never deny. @default false */
  shadow: boolean;
  /** @default "shared" (every request without key material shares one log) */
  missingKey: MissingKeyOutcome;
  /** @default every request */
  match?: RuleMatch;
  /** How the rule counts (README "Algorithms"). @default "sliding-log" */
  algorithm: Algorithm;
  /**
   * Give back what a request consumed when the origin answers 5xx (the proxy; the middleware
   * after `next()`). Exact for the sliding log, best effort for the others. @default never
   */
  refundOn?: RefundOn;
}

/** When a rule gives back what a request consumed. */
export type RefundOn = "5xx";

/** Where "ip" keys come from and how addresses are grouped. */
export interface ClientIpConfig {
  /**
   * A header set by a proxy you run in front of the worker, trusted instead of CF-Connecting-IP.
   * Unset, only CF-Connecting-IP is read: any client can forge the others.
   * @default undefined
   */
  trustedProxyHeader?: "x-forwarded-for" | "x-real-ip" | "true-client-ip";
  /** For X-Forwarded-For: how many of your proxies append to it (the entry this far from the right). @default 1 */
  trustedProxyHops: number;
  /** IPv6 addresses are grouped by this prefix: one subscriber owns a whole /64. @default 64 */
  ipv6PrefixLength: number;
  /** IPv4 addresses are grouped by this prefix. @default 32 */
  ipv4PrefixLength: number;
}

/** The client-IP defaults, for the config schema, the middleware and /check alike. */
export const DEFAULT_CLIENT_IP = {
  trustedProxyHops: 1,
  ipv6PrefixLength: 64,
  ipv4PrefixLength: 32,
} as const satisfies ClientIpConfig;

/** Denial cache, fallback, breaker and single flight: see resilience-config.ts. */
export interface LimiterConfig extends ResilienceConfig {
  rules: RuleConfig[];
  /** Store call timeout. @default 500 */
  timeoutMs: number;
  /** @default "open" */
  failMode: FailMode;
  /** Redis key prefix. @default "edge-limiter" */
  prefix: string;
  /** @default "redis" */
  clock: ClockSource;
  /** Also send X-RateLimit-Limit / -Remaining / -Reset. @default false */
  legacyHeaders: boolean;
  clientIp: ClientIpConfig;
  /**
   * Request headers whose value identifies a request for idempotent counting: the first present
   * one is the request id, and a retry carrying it within the window is not counted again.
   * Off by default: the id comes from the client, and a client that repeats one id gets every
   * repeat through as a replay of its first admission (README "Request ids").
   * @default []
   */
  requestIdHeaders: string[];
}

const MAX_TIMEOUT_MS = 30_000;

const failModeSchema = v.picklist(["open", "closed"], 'must be "open" or "closed"');

const windowSchema = v.pipe(
  v.custom<string | number>((input) => {
    const ms = parseDuration(input);
    return ms !== undefined && ms >= MIN_WINDOW_MS && ms <= MAX_WINDOW_MS;
  }, 'must be a duration ("500ms", "10s", "1m", "1h", "1d" or ms) up to 7d'),
  v.transform((input) => parseDuration(input) as number),
);

// A path pattern: literal segments, ":name" (one segment) and "*" (anything, including "/").
const PATH_PATTERN = /^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]{0,255}$/;
const pathSchema = v.pipe(
  v.string("must be a path pattern"),
  v.regex(PATH_PATTERN, 'must be a path pattern starting with "/" ("/api/*", "/users/:id")'),
);
const METHOD = /^[A-Za-z]{1,16}$/;

const matchSchema = plainObject(
  {
    path: v.optional(
      v.union(
        [pathSchema, v.pipe(v.array(pathSchema), v.minLength(1, "must not be empty"))],
        'must be a path pattern or a non-empty array of them ("/api/*")',
      ),
    ),
    methods: v.optional(
      v.pipe(
        v.array(
          v.pipe(v.string(), v.regex(METHOD, "must be an HTTP method"), v.toUpperCase()),
          "must be an array of HTTP methods",
        ),
        v.minLength(1, "must not be empty"),
      ),
    ),
    caseSensitive: v.optional(v.boolean("must be true or false")),
  },
  "must be an object with path, methods and/or caseSensitive",
);

const ruleSchema = plainObject(
  {
    name: v.pipe(
      v.string("must be 1-64 characters of [A-Za-z0-9_.-]"),
      v.regex(POLICY_NAME, "must be 1-64 characters of [A-Za-z0-9_.-]"),
      v.check(
        (name) => !name.startsWith(ADHOC_POLICY_PREFIX),
        `must not start with "${ADHOC_POLICY_PREFIX}" (reserved for ad-hoc checks)`,
      ),
    ),
    limit: integerIn(1, MAX_LIMIT),
    window: windowSchema,
    cost: v.optional(
      v.pipe(
        v.number("must be an integer from 1 to limit"),
        v.integer("must be an integer from 1 to limit"),
      ),
      1,
    ),
    key: v.optional(
      v.pipe(
        v.string('must be "ip", "global" or "header:<name>"'),
        v.regex(
          /^(ip|global|header:[A-Za-z0-9!#$%&'*+.^_`|~-]+)$/,
          'must be "ip", "global" or "header:<name>"',
        ),
        v.toLowerCase(),
      ),
      "ip",
    ),
    failMode: v.optional(failModeSchema),
    shadow: v.optional(v.boolean("must be true or false"), false),
    missingKey: v.optional(
      v.picklist(["shared", "skip", "deny"], 'must be "shared", "skip" or "deny"'),
      "shared",
    ),
    match: v.optional(matchSchema),
    algorithm: v.optional(
      v.picklist(ALGORITHMS, `must be one of ${ALGORITHMS.map((a) => `"${a}"`).join(", ")}`),
      DEFAULT_ALGORITHM,
    ),
    refundOn: v.optional(v.picklist(["5xx"], 'must be "5xx"')),
  },
  "must be an object",
);

const clientIpSchema = plainObject(
  {
    trustedProxyHeader: v.optional(
      v.pipe(
        v.string(),
        v.toLowerCase(),
        v.picklist(
          ["x-forwarded-for", "x-real-ip", "true-client-ip"],
          'must be "X-Forwarded-For", "X-Real-IP" or "True-Client-IP"',
        ),
      ),
    ),
    trustedProxyHops: v.optional(integerIn(1, 16), DEFAULT_CLIENT_IP.trustedProxyHops),
    ipv6PrefixLength: v.optional(integerIn(1, 128), DEFAULT_CLIENT_IP.ipv6PrefixLength),
    ipv4PrefixLength: v.optional(integerIn(1, 32), DEFAULT_CLIENT_IP.ipv4PrefixLength),
  },
  "must be an object",
);

/** Header names (RFC 9110 tokens), lower-cased; at most 8. */
export const requestIdHeadersSchema = v.pipe(
  v.array(
    v.pipe(
      v.string("must be a header name"),
      v.regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/, "must be a header name"),
      v.toLowerCase(),
    ),
    "must be an array of header names",
  ),
  v.maxLength(8, "must list at most 8 header names"),
);

// Unknown fields are errors, not ignored: a typo ("limt") must not silently drop a limit.
const configSchema = plainObject(
  {
    rules: v.optional(v.array(ruleSchema, "must be an array"), []),
    timeoutMs: v.optional(integerIn(1, MAX_TIMEOUT_MS), DEFAULT_LIMITER_TIMEOUT_MS),
    failMode: v.optional(failModeSchema, "open"),
    prefix: v.optional(
      v.pipe(
        v.string("must be 1-64 characters of [A-Za-z0-9_.:-]"),
        v.regex(/^[A-Za-z0-9_.:-]{1,64}$/, "must be 1-64 characters of [A-Za-z0-9_.:-]"),
      ),
      "edge-limiter",
    ),
    clock: v.optional(v.picklist(["redis", "caller"], 'must be "redis" or "caller"'), "redis"),
    legacyHeaders: v.optional(v.boolean("must be true or false"), false),
    clientIp: v.optional(clientIpSchema, {}),
    requestIdHeaders: v.optional(requestIdHeadersSchema, []),
    ...resilienceEntries,
  },
  "must be an object",
);

type RuleOutput = v.InferOutput<typeof ruleSchema>;

export interface ParseConfigOptions {
  /**
   * The deployed worker's reading: an absent or blank LIMITER_CONFIG, or one without `rules`, is
   * an error (a forgotten var must not leave the proxy running unprotected). `"rules": []` is
   * still valid when written out: a deployment that only serves /check.
   * @default false (a missing config or `rules` means no rules: for code that builds its own)
   */
  required?: boolean;
}

/**
 * LIMITER_CONFIG: a JSON string (from `npm start`, or a wrangler var) or an object (a TOML table
 * in wrangler.toml). Validated once per isolate; the first wrong field is named.
 */
export function parseLimiterConfig(
  raw: unknown,
  options: ParseConfigOptions = {},
): Validated<LimiterConfig> {
  const blank = raw === undefined || raw === null || (typeof raw === "string" && !raw.trim());
  if (options.required && blank) {
    return invalid("LIMITER_CONFIG", "is not set: without rules the worker would limit nothing");
  }
  let input = raw ?? {};
  if (typeof input === "string") {
    try {
      input = input.trim() === "" ? {} : JSON.parse(input);
    } catch (error) {
      return invalid("LIMITER_CONFIG", `not valid JSON: ${(error as Error).message}`);
    }
  }
  // Every string (a rule name becomes part of Redis keys and headers), before the schema reads any.
  const illFormed = illFormedString(input, "LIMITER_CONFIG");
  if (illFormed) return illFormed;
  if (options.required && isPlainObject(input) && input.rules === undefined) {
    return invalid("rules", 'is required (write "rules": [] for a worker that only serves /check)');
  }
  const result = v.safeParse(configSchema, input);
  if (!result.success) return firstIssue(result.issues, "LIMITER_CONFIG");
  const { rules, clientIp, ...rest } = result.output;

  // Cross-field checks the schema cannot express per field: each rule's limit and cost within
  // its algorithm's caps, and every sliding-log rule's cost together within MAX_LOG_COST (one
  // request may match them all, and is decided in one call).
  const issue = boundsIssue(rules);
  if (issue) return invalid(`rules[${issue.index}].${issue.field}`, issue.detail);
  const parsed: RuleConfig[] = [];
  for (const [index, rule] of rules.entries()) {
    if (rule.cost < 1 || rule.cost > rule.limit) {
      return invalid(`rules[${index}].cost`, "must be an integer from 1 to limit");
    }
    if (parsed.some((other) => other.name === rule.name)) {
      return invalid(`rules[${index}].name`, `duplicate rule name "${rule.name}"`);
    }
    parsed.push(toRuleConfig(rule));
  }
  return {
    ok: true,
    value: { ...rest, rules: parsed, clientIp: clientIp as ClientIpConfig },
  };
}

function toRuleConfig(rule: RuleOutput): RuleConfig {
  const { window, match, failMode, refundOn, ...rest } = rule;
  const paths = match?.path === undefined ? undefined : [match.path].flat();
  return {
    ...rest,
    windowMs: window,
    ...(failMode ? { failMode } : {}),
    ...(refundOn ? { refundOn } : {}),
    ...(match
      ? {
          match: {
            ...(paths ? { paths } : {}),
            ...(match.methods ? { methods: match.methods } : {}),
            ...(match.caseSensitive !== undefined ? { caseSensitive: match.caseSensitive } : {}),
          },
        }
      : {}),
  };
}

/** Validates rules given in code (the middleware) with the same schema as LIMITER_CONFIG. */
export function parseRules(raw: unknown): Validated<RuleConfig[]> {
  const parsed = parseLimiterConfig({ rules: raw });
  return parsed.ok ? { ok: true, value: parsed.value.rules } : parsed;
}
