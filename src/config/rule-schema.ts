/**
 * The one rule shape: a LIMITER_CONFIG rule and a middleware rule are this schema's input
 * (RuleInput), and every layer past config reads its output (RuleConfig). The field docs live on
 * the schema entries and both types are inferred from it, so editors show them on either; the
 * checks across fields and rules follow (ruleListIssue).
 */
import * as v from "valibot";
import { LONGEST_PERIOD_MS } from "../limiter/calendar-period";
import { DEFAULT_COST } from "../limiter/defaults";
import { isLogAlgorithm } from "../store/algorithm";
import { boundsIssue, DEFAULT_CONCURRENCY_TIMEOUT_MS } from "../store/caps";
import { POLICY_NAME } from "../store/keys";
import { ADHOC_POLICY_PREFIX } from "./limits";
import { matchSchema } from "./match-schema";
import {
  anchorSchema,
  NEEDS_PERIOD,
  PERIOD_ALGORITHM,
  PERIOD_NOT_LEASED,
  PERIOD_NOT_WINDOW,
  periodSchema,
  timezoneSchema,
} from "./period-schema";
import {
  algorithmNameSchema,
  costFits,
  costSchema,
  failModeSchema,
  limitSchema,
  plainObject,
  timeoutSchema,
  windowSchema,
} from "./schema-parts";
import { countedIn, usageIssue, usageSchema } from "./usage-schema";
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

export { MAX_PATH_PATTERN_LENGTH } from "./match-schema";

const NAME_RULE = "must be 1-64 characters of [A-Za-z0-9_.-]";
const nameSchema = v.pipe(
  v.string(NAME_RULE),
  v.regex(POLICY_NAME, NAME_RULE),
  v.check(
    (name) => !name.startsWith(ADHOC_POLICY_PREFIX),
    `must not start with "${ADHOC_POLICY_PREFIX}" (reserved for ad-hoc checks)`,
  ),
);

/** Why a concurrency rule refuses a `window`. */
const NO_CONCURRENCY_WINDOW =
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
       * A quota per calendar period in place of `window` (docs/calendar-quotas.md): `limit`
       * units per "day", "week" or "month" in `timezone`, reset when the next period starts.
       */
      period: v.optional(periodSchema),
      /** A period rule's IANA time zone ("Europe/Berlin"). @default "UTC" */
      timezone: v.optional(timezoneSchema),
      /**
       * A period rule's ISO-8601 instant ("2026-01-31T09:00:00Z") whose weekday (week) or day of
       * month (month) and time of day, in `timezone`, start every period (a billing day).
       * @default midnight; Monday (week); the 1st (month)
       */
      anchor: v.optional(anchorSchema),
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
      /**
       * How the rule counts (docs/algorithms.md). @default "sliding-log"; "calendar" with `period`
       */
      algorithm: v.optional(algorithmNameSchema),
      /**
       * Give back what a request consumed when the origin answers 5xx (the proxy; the middleware
       * after `next()`). Exact for the sliding log, best effort for the others. @default never
       */
      refundOn: v.optional(refundOnSchema),
      /**
       * Let each isolate lease a few units of a hot key and decide them with no round trip,
       * still exactly (docs/leases.md). The sliding log only. @default false
       */
      lease: v.optional(v.boolean("must be true or false"), false),
      /**
       * Read a per-key limit override and key block from the store at run time (docs/plans.md),
       * in the same script call: one billed command more per store decision. @default false
       */
      overrides: v.optional(v.boolean("must be true or false"), false),
      /** Where a request's usage is read; `cost` is then its reservation (docs/usage.md). */
      usage: v.optional(usageSchema),
    },
    "must be an object",
  ),
  // A period in place of a window: a calendar quota (its algorithm, "calendar", is implied).
  v.forward(
    v.check((rule) => rule.period === undefined || rule.window === undefined, PERIOD_NOT_WINDOW),
    ["period"],
  ),
  v.forward(
    v.check(
      (rule) =>
        rule.period === undefined || rule.algorithm === undefined || rule.algorithm === "calendar",
      PERIOD_ALGORITHM,
    ),
    ["algorithm"],
  ),
  v.forward(
    v.check(
      (rule) => rule.algorithm !== "calendar" || rule.period !== undefined,
      'is required by algorithm "calendar" ("day", "week" or "month")',
    ),
    ["period"],
  ),
  v.forward(
    v.check((rule) => rule.period !== undefined || rule.timezone === undefined, NEEDS_PERIOD),
    ["timezone"],
  ),
  v.forward(
    v.check((rule) => rule.period !== undefined || rule.anchor === undefined, NEEDS_PERIOD),
    ["anchor"],
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
    v.check(
      (rule) =>
        rule.algorithm === "concurrency" || rule.window !== undefined || rule.period !== undefined,
      "is required",
    ),
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
  v.transform(
    ({
      window,
      timeout,
      failMode,
      refundOn,
      match,
      period,
      timezone,
      anchor,
      algorithm,
      ...given
    }) => {
      const rest = {
        ...given,
        /** How the rule counts: "calendar" with `period`; a usage rule's log weighs admissions. */
        algorithm: period ? ("calendar" as const) : countedIn(given.usage, algorithm),
      };
      return {
        ...rest,
        /**
         * The window in ms (the config's `window`, read); a concurrency rule's slot timeout (its
         * `timeout`, default 60 s): how long a slot it hands out lives unreleased.
         */
        windowMs: period
          ? LONGEST_PERIOD_MS[period]
          : rest.algorithm === "concurrency"
            ? (timeout ?? DEFAULT_CONCURRENCY_TIMEOUT_MS)
            : (window ?? DEFAULT_CONCURRENCY_TIMEOUT_MS),
        ...(period
          ? {
              /** A calendar quota's period: its unit, zone ("UTC" when none) and anchor (Unix ms). */
              period: {
                unit: period,
                timezone: timezone ?? "UTC",
                ...(anchor !== undefined ? { anchor } : {}),
              },
            }
          : {}),
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
      };
    },
  ),
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
  'applies to the sliding log only ("sliding-log"): the O(1) algorithms keep counts, which a lease cannot stamp ahead';

/** Why `lease: true` is refused with `overrides: true`. */
const OVERRIDES_NOT_LEASED =
  "cannot be combined with overrides: a lease would spend past a change of the override for its whole life";

/**
 * The checks across fields and rules the schema cannot express per field: each rule's limit and
 * cost within its algorithm's caps, every sliding-log rule's cost together within MAX_RING_COST
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
    if (rule.lease && rule.period) {
      return invalid(`rules[${index}].lease`, PERIOD_NOT_LEASED);
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
    const usage = usageIssue(rule, index);
    if (usage) return usage;
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
