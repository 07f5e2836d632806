/**
 * The one rule shape: a LIMITER_CONFIG rule and a middleware rule are this schema's input
 * (RuleInput), and every layer past config reads its output (RuleConfig). The field docs live on
 * the schema entries and both types are inferred from it, so editors show them on either; the
 * checks across fields and rules follow (ruleListIssue).
 */
import * as v from "valibot";
import { DEFAULT_COST } from "../limiter/defaults";
import { isLogAlgorithm } from "../store/algorithm";
import { boundsIssue, DEFAULT_CONCURRENCY_TIMEOUT_MS } from "../store/caps";
import { POLICY_NAME } from "../store/keys";
import { ADHOC_POLICY_PREFIX } from "./limits";
import {
  algorithmSchema,
  costFits,
  costSchema,
  failModeSchema,
  limitSchema,
  plainObject,
  timeoutSchema,
  windowSchema,
} from "./schema-parts";
import { usageSchema } from "./usage-schema";
import { invalid } from "./validation";

/** What a rule does for a request that lacks its key material (no IP, no such header). */
const missingKeySchema = v.picklist(
  ["shared", "skip", "deny"],
  'must be "shared", "skip" or "deny"',
);

/** When a rule gives back what a request consumed: when the origin (or the app) answers 5xx. */
const refundOnSchema = v.picklist(["5xx"], 'must be "5xx"');

/** Where a rule's client key comes from (not the key itself: that is read per request). */
export type KeySpec = "ip" | "global" | `header:${string}`;

const KEY_SPEC = /^(ip|global|header:[A-Za-z0-9!#$%&'*+.^_`|~-]+)$/;
const keySpecSchema = v.pipe(
  v.custom<KeySpec>(
    (input) => typeof input === "string",
    'must be "ip", "global" or "header:<name>"',
  ),
  v.regex(KEY_SPEC, 'must be "ip", "global" or "header:<name>"'),
  v.transform((spec) => spec.toLowerCase()),
);

const NAME_RULE = "must be 1-64 characters of [A-Za-z0-9_.-]";
const nameSchema = v.pipe(
  v.string(NAME_RULE),
  v.regex(POLICY_NAME, NAME_RULE),
  v.check(
    (name) => !name.startsWith(ADHOC_POLICY_PREFIX),
    `must not start with "${ADHOC_POLICY_PREFIX}" (reserved for ad-hoc checks)`,
  ),
);

// A path pattern: literal segments, ":name" (one segment) and "*" (anything, including "/").
// At most MAX_PATH_PATTERN_LENGTH characters: matching costs path × pattern (rules/match.ts).
export const MAX_PATH_PATTERN_LENGTH = 256;
const PATH_PATTERN = /^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/;
const pathSchema = v.pipe(
  v.string("must be a path pattern"),
  v.maxLength(
    MAX_PATH_PATTERN_LENGTH,
    `must be a path pattern of at most ${MAX_PATH_PATTERN_LENGTH} characters`,
  ),
  v.regex(PATH_PATTERN, 'must be a path pattern starting with "/" ("/api/*", "/users/:id")'),
);
const METHOD = /^[A-Za-z]{1,16}$/;

/** Which requests a rule applies to. Both parts must fit; an absent part fits everything. */
const matchSchema = v.pipe(
  plainObject(
    {
      /** Path patterns ("/api/*", "/login", "/users/:id"); any one may fit. @default every path */
      path: v.optional(
        v.union(
          [pathSchema, v.pipe(v.array(pathSchema), v.minLength(1, "must not be empty"))],
          'must be a path pattern or a non-empty array of them ("/api/*")',
        ),
      ),
      /** HTTP methods (upper-cased when read). @default every method */
      methods: v.optional(
        v.pipe(
          v.array(
            v.pipe(v.string(), v.regex(METHOD, "must be an HTTP method"), v.toUpperCase()),
            "must be an array of HTTP methods",
          ),
          v.minLength(1, "must not be empty"),
        ),
      ),
      /**
       * Compare literal path segments case-sensitively. Off by default: many origins (Express,
       * ASP.NET, IIS, S3 sites behind rewrites) serve "/Login" as "/login", and a limit that a
       * client can dodge by changing case protects nothing. Counting "/LOGIN" on an origin that
       * 404s it costs one unit; missing it on one that serves it is a bypass.
       * @default false
       */
      caseSensitive: v.optional(v.boolean("must be true or false")),
    },
    "must be an object with path, methods and/or caseSensitive",
  ),
  // Read as: `paths` always a list; an absent part is absent, not undefined.
  v.transform(({ path, methods, caseSensitive }) => ({
    ...(path !== undefined
      ? {
          /** Path patterns ("/api/*", "/login", "/users/:id"); any one may fit. @default every path */
          paths: [path].flat(),
        }
      : {}),
    ...(methods !== undefined
      ? {
          /** Upper-case methods. @default every method */
          methods,
        }
      : {}),
    ...(caseSensitive !== undefined
      ? {
          /** Compare literal path segments case-sensitively (see the config's `caseSensitive`). @default false */
          caseSensitive,
        }
      : {}),
  })),
);
/** Which requests a rule applies to, as read: see matchSchema. */
export type RuleMatch = v.InferOutput<typeof matchSchema>;

/** Why a concurrency rule refuses a `window`. */
export const NO_CONCURRENCY_WINDOW =
  'is not taken by a concurrency rule: it counts requests in flight, not per window (a slot lasts until its request ends, at most "timeout")';

// Unknown fields are errors, not ignored: a typo ("limt") must not silently drop a limit.
export const ruleSchema = v.pipe(
  plainObject(
    {
      /** Policy name: in Redis keys and headers. 1-64 of [A-Za-z0-9_.-]. */
      name: nameSchema,
      /** Units per window (up to the algorithm's cap, docs/check-api.md "Limits"). */
      limit: limitSchema,
      /**
       * "500ms", "10s", "1m", "1h", "1d" or ms; at most 7d. Required, but for a concurrency
       * rule, which has none (its slots last until released, at most `timeout`).
       */
      window: v.optional(windowSchema),
      /**
       * A concurrency rule's slot timeout: a slot whose release never comes (a crashed holder)
       * lapses then. A duration up to 1 day; concurrency rules only. @default "60s"
       */
      timeout: v.optional(timeoutSchema),
      /** Units one request consumes, from 1 to `limit`. @default 1 */
      cost: v.optional(costSchema, DEFAULT_COST),
      /**
       * Where the client key comes from: "ip", "header:<name>" (lower-cased when read) or
       * "global". The middleware's `key` option overrides it. @default "ip"
       */
      key: v.optional(keySpecSchema, "ip"),
      /** Overrides the limiter's fail mode for this rule. @default the limiter's `failMode` */
      failMode: v.optional(failModeSchema),
      /** Decide, log and add headers, but never deny. @default false */
      shadow: v.optional(v.boolean("must be true or false"), false),
      /**
       * What a request without key material gets.
       * @default "shared" (every request without key material shares one log)
       */
      missingKey: v.optional(missingKeySchema, "shared"),
      /** Narrows the rule (for the middleware: within the route it is mounted on). @default every request */
      match: v.optional(matchSchema),
      /** How the rule counts (docs/algorithms.md). @default "sliding-log" */
      algorithm: algorithmSchema,
      /**
       * Give back what a request consumed when the origin answers 5xx (the proxy; the middleware
       * after `next()`). Exact for the sliding log, best effort for the others. @default never
       */
      refundOn: v.optional(refundOnSchema),
      /**
       * Let each isolate lease a few units of a hot key and decide them with no round trip,
       * still exactly (docs/leases.md). The sliding logs only. @default false
       */
      lease: v.optional(v.boolean("must be true or false"), false),
      /**
       * Read a per-key limit override and key block from the store at run time (docs/plans.md),
       * in the same script call: one billed command more per store decision. @default false
       */
      overrides: v.optional(v.boolean("must be true or false"), false),
      /**
       * Where what a request used is read when its response ends (docs/usage.md): `cost` is then
       * the reservation taken at admission, and the difference is charged or given back. The
       * rule counts in the weighted log ("sliding-log-weighted"), limits up to 10^12.
       * @default none (every request costs `cost`)
       */
      usage: v.optional(usageSchema),
    },
    "must be an object",
  ),
  // Which of window and timeout a rule takes depends on its algorithm (another field).
  v.forward(
    v.check(
      (rule) => rule.algorithm !== "concurrency" || rule.window === undefined,
      NO_CONCURRENCY_WINDOW,
    ),
    ["window"],
  ),
  v.forward(
    v.check((rule) => rule.algorithm === "concurrency" || rule.window !== undefined, "is required"),
    ["window"],
  ),
  v.forward(
    v.check(
      (rule) => rule.algorithm === "concurrency" || rule.timeout === undefined,
      'applies to concurrency rules only ("algorithm": "concurrency"); a rate rule has a "window"',
    ),
    ["timeout"],
  ),
  // Read as: the window in ms; an absent option is absent, not undefined.
  v.transform(({ window, timeout, failMode, refundOn, match, usage, ...rest }) => ({
    ...rest,
    // A usage rule's log weighs each admission (its units change when settled).
    algorithm:
      usage && rest.algorithm === "sliding-log"
        ? ("sliding-log-weighted" as const)
        : rest.algorithm,
    /**
     * The window in ms (the config's `window`, read); a concurrency rule's slot timeout (its
     * `timeout`, default 60 s): how long a slot it hands out lives unreleased.
     */
    windowMs:
      rest.algorithm === "concurrency"
        ? (timeout ?? DEFAULT_CONCURRENCY_TIMEOUT_MS)
        : (window ?? DEFAULT_CONCURRENCY_TIMEOUT_MS),
    ...(failMode
      ? {
          /** Overrides the limiter's fail mode for this rule. @default the limiter's `failMode` */
          failMode,
        }
      : {}),
    ...(refundOn
      ? {
          /** Give back what a request consumed when the origin answers 5xx. @default never */
          refundOn,
        }
      : {}),
    ...(match
      ? {
          /** Which requests the rule applies to. @default every request */
          match,
        }
      : {}),
    ...(usage
      ? {
          /** Where what a request used is read (docs/usage.md). @default none */
          usage,
        }
      : {}),
  })),
);

/** A rule as written: in LIMITER_CONFIG's `rules`, or given to the middleware in code. */
export type RuleInput = v.InferInput<typeof ruleSchema>;
/** A rule as read (defaults filled in, the window in ms): what every layer past config uses. */
export type RuleConfig = v.InferOutput<typeof ruleSchema>;

/**
 * Why `lease: true` is refused with an O(1) algorithm (a rule's and an ad-hoc /check's words):
 * a lease is exact because its units are stamped in the log at the lease's end, and those
 * algorithms keep counts, not times.
 */
export const LEASE_NEEDS_LOG =
  'applies to the sliding logs only ("sliding-log", "sliding-log-zset"): the O(1) algorithms keep counts, which a lease cannot stamp ahead';

/** Why `usage` is refused with another algorithm than the log's (settle needs its entries). */
export const USAGE_NEEDS_LOG =
  'applies to the sliding log only ("sliding-log", counted weighted, or "sliding-log-weighted"): a settle finds the request\'s entry there';

/** Why `lease: true` is refused with `overrides: true`. */
export const OVERRIDES_NOT_LEASED =
  "cannot be combined with overrides: a lease would spend past a change of the override for its whole life";

/**
 * The checks across fields and rules the schema cannot express per field: each rule's limit and
 * cost within its algorithm's caps, every sliding-log rule's cost together within MAX_ZSET_COST
 * (one request may match them all, and is decided in one call), cost at most the limit, names
 * distinct. The first issue, named `rules[i].<field>`; undefined when there is none.
 */
export function ruleListIssue(
  rules: readonly RuleConfig[],
): { ok: false; field: string; detail: string } | undefined {
  const issue = boundsIssue(rules);
  if (issue) return invalid(`rules[${issue.index}].${issue.field}`, issue.detail);
  const names = new Set<string>();
  for (const [index, rule] of rules.entries()) {
    if (!costFits(rule.cost, rule.limit)) {
      return invalid(`rules[${index}].cost`, "must be an integer from 1 to limit");
    }
    if (rule.lease && !isLogAlgorithm(rule.algorithm)) {
      return invalid(`rules[${index}].lease`, LEASE_NEEDS_LOG);
    }
    if (rule.refundOn && rule.algorithm === "concurrency") {
      return invalid(
        `rules[${index}].refundOn`,
        "does not apply to a concurrency rule: its slot is given back when the request ends, whatever the status",
      );
    }
    if (rule.usage && rule.algorithm !== "sliding-log-weighted") {
      return invalid(`rules[${index}].usage`, USAGE_NEEDS_LOG);
    }
    if (rule.lease && rule.overrides) {
      return invalid(`rules[${index}].lease`, OVERRIDES_NOT_LEASED);
    }
    if (names.has(rule.name)) {
      return invalid(`rules[${index}].name`, `duplicate rule name "${rule.name}"`);
    }
    names.add(rule.name);
  }
  return undefined;
}
