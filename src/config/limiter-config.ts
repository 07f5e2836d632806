/**
 * config/: what a deployment or an app writes down, read once and checked strictly. It owns the
 * worker's LIMITER_CONFIG (this file, with client-ip-config.ts and resilience-config.ts), the one
 * rule shape (rule-schema.ts: a LIMITER_CONFIG rule, a middleware rule, and through
 * schema-parts.ts the fields of a /check body), the documented bounds (limits.ts) and how a wrong
 * field is named (validation.ts, config-issue.ts). Pure validation, no I/O, no clock. It may
 * import store/algorithm and store/caps (the algorithm list, the caps the store enforces) and
 * limiter/types and limiter/defaults (the limiter's public types and defaults; never an implementation file), analytics/defaults, and the leaf src/utf16.ts, nothing else; the layers above read
 * their rule and config types from here.
 */
import * as v from "valibot";
import {
  DEFAULT_CLOCK,
  DEFAULT_FAIL_MODE,
  DEFAULT_LIMITER_TIMEOUT_MS,
  DEFAULT_PREFIX,
} from "../limiter/defaults";
import { analyticsSchema } from "./analytics-config";
import { clientIpSchema } from "./client-ip-config";
import { firstIssue } from "./config-issue";
import { regionsSchema } from "./regions-config";
import { resilienceEntries } from "./resilience-config";
import { type RuleConfig, ruleListIssue, ruleSchema } from "./rule-schema";
import { failModeSchema, integerIn, plainObject } from "./schema-parts";
import { reshardSchema, shardsSchema } from "./shards-config";
import { illFormedString, invalid, isPlainObject, type Validated } from "./validation";

const MAX_TIMEOUT_MS = 30_000;

/** Header names (RFC 9110 tokens), lower-cased; at most 8. */
const requestIdHeadersSchema = v.pipe(
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
/** How often an isolate refreshes its copy of the network blocks, by default (ms). */
const DEFAULT_BLOCKS_REFRESH_MS = 1_000;

const networkBlocksSchema = v.pipe(
  v.union(
    [
      v.boolean(),
      plainObject(
        { refreshMs: v.optional(integerIn(100, 60_000), DEFAULT_BLOCKS_REFRESH_MS) },
        "must be true, false or an object",
      ),
    ],
    'must be true, false or { "refreshMs": 100..60000 }',
  ),
  v.transform((value) =>
    value === false
      ? false
      : { refreshMs: value === true ? DEFAULT_BLOCKS_REFRESH_MS : value.refreshMs },
  ),
);

/**
 * LIMITER_CONFIG's schema.
 * @public for test/repo/config-docs.test.ts, which holds docs/configuration.md to its fields: it
 * bundles this file from a string, an import knip cannot follow.
 */
export const configSchema = plainObject(
  {
    /** The rules every proxied request is decided against (docs/configuration.md). */
    rules: v.optional(v.array(ruleSchema, "must be an array"), []),
    /** Store call timeout (ms). @default 500 */
    timeoutMs: v.optional(integerIn(1, MAX_TIMEOUT_MS), DEFAULT_LIMITER_TIMEOUT_MS),
    /** What to decide when the store cannot answer. @default "open" */
    failMode: v.optional(failModeSchema, DEFAULT_FAIL_MODE),
    /** Redis key prefix. @default "edge-limiter" */
    prefix: v.optional(
      v.pipe(
        v.string("must be 1-64 characters of [A-Za-z0-9_.:-]"),
        v.regex(/^[A-Za-z0-9_.:-]{1,64}$/, "must be 1-64 characters of [A-Za-z0-9_.:-]"),
      ),
      DEFAULT_PREFIX,
    ),
    /** Whose clock orders the log. @default "redis" */
    clock: v.optional(
      v.picklist(["redis", "caller"], 'must be "redis" or "caller"'),
      DEFAULT_CLOCK,
    ),
    /** Also send X-RateLimit-Limit / -Remaining / -Reset. @default false */
    legacyHeaders: v.optional(v.boolean("must be true or false"), false),
    /** Where "ip" keys come from and how addresses are grouped. */
    clientIp: v.optional(clientIpSchema, {}),
    /**
     * Request headers whose value identifies a request for idempotent counting: the first present
     * one is the request id, and a retry carrying it within the window is not counted again.
     * Off by default: the id comes from the client, and a client that repeats one id gets every
     * repeat through as a replay of its first admission (docs/request-ids-and-refunds.md).
     * @default []
     */
    requestIdHeaders: v.optional(requestIdHeadersSchema, []),
    // Denial cache, fallback, breaker and single flight: see resilience-config.ts.
    ...resilienceEntries,
    /**
     * Isolate leases (docs/leases.md) for rules with `lease: true`: `false` decides every such
     * request at home or in its region, never from a lease this isolate holds. @default true
     */
    isolateLeases: v.optional(v.boolean("must be true or false"), true),
    /**
     * Regional leases (docs/regions.md): a store per region, decisions near every region and
     * still exact. @default {} (home only)
     */
    regions: v.optional(regionsSchema, {}),
    /**
     * Shards (docs/shards.md): the databases client keys are placed over, each the suffix of its
     * bindings (`""`: UPSTASH_REDIS_REST_URL / _TOKEN). @default one database, unsharded
     */
    shards: v.optional(shardsSchema),
    /**
     * A change of `shards` at an instant, exact through one longest window (docs/shards.md):
     * the shards before it and when. @default none
     */
    reshard: v.optional(reshardSchema),
    /**
     * Network blocks (docs/plans.md): IP/CIDR, country and ASN blocks set at run time, which every
     * isolate copies and refreshes at most every `refreshMs` (one store call) while requests
     * arrive. `true` for the default refresh. @default false
     */
    networkBlocks: v.optional(networkBlocksSchema, false),
    /** Per-rule counts for /check/stats and the dashboard (analytics-config.ts). @default off */
    analytics: v.optional(analyticsSchema, {}),
  },
  "must be an object",
);

/**
 * LIMITER_CONFIG as read (defaults filled in): the rules and every setting (docs/configuration.md).
 * Not createLimiter's LimiterOptions: the worker's runtime builds those from it.
 */
export type LimiterConfig = v.InferOutput<typeof configSchema>;

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
 *
 * @example
 * ```ts
 * const parsed = parseConfig(env.LIMITER_CONFIG, { required: true });
 * if (!parsed.ok) throw new Error(`LIMITER_CONFIG: ${parsed.field} ${parsed.detail}`);
 * const rules = createRules(parsed.value);
 * ```
 */
export function parseConfig(
  raw: unknown,
  options: ParseConfigOptions = {},
): Validated<LimiterConfig> {
  if (options.required && (raw === undefined || raw === null)) {
    return invalid("LIMITER_CONFIG", "is not set: without rules the worker would limit nothing");
  }
  // Set, but to nothing: say so (a "not set" would send the operator looking for a missing var).
  if (options.required && typeof raw === "string" && !raw.trim()) {
    return invalid("LIMITER_CONFIG", "is blank: without rules the worker would limit nothing");
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
  if (!result.success) return firstIssue(result.issues, "LIMITER_CONFIG", configSchema);
  if (result.output.reshard && !result.output.shards) {
    return invalid("reshard", 'needs "shards": the shards in force from its instant');
  }
  const { shards, reshard } = result.output;
  if (reshard && shards && sameShards(shards, reshard.from)) {
    // A reshard that moves no key would still be told to the shards, and hold off the next
    // reshard for its whole transition (docs/shards.md "Which mistakes are refused").
    return invalid("reshard.from", 'names the same shards as "shards": nothing to reshard');
  }
  if (reshard && shards && reshard.from[0] !== shards[0]) {
    // The first shard holds the network blocks and the analytics: another first starts with none.
    return invalid(
      "reshard.from",
      `must list "shards"' first shard (${JSON.stringify(shards[0])}) first: it holds the network blocks and analytics, which a reshard does not move`,
    );
  }
  const period = reshard ? result.output.rules.findIndex((rule) => rule.period) : -1;
  if (period >= 0) {
    // A moved key's old shard is read only for the logs (a peek of its window); a counter
    // starts afresh on the new shard, which for a month's quota is a second month's budget.
    return invalid(
      `rules[${period}].period`,
      'cannot be used during a "reshard": a moved key\'s quota would start afresh on its new shard (a second budget for the period)',
    );
  }
  const usage = reshard ? result.output.rules.findIndex((rule) => rule.usage) : -1;
  if (usage >= 0) {
    // The transition reads a moved key's old shard for the request log only: a usage rule's
    // weighted log (or counter) would start afresh on the new shard, a second budget for the
    // window; and a settle on the old shard can still raise what it holds.
    return invalid(
      `rules[${usage}].usage`,
      'cannot be used during a "reshard": a moved key\'s budget would start afresh on its new shard (a second budget for the window)',
    );
  }
  return ruleListIssue(result.output.rules) ?? { ok: true, value: result.output };
}

/** Validates rules given in code (the middleware) with the same schema as LIMITER_CONFIG. */
export function parseRules(raw: unknown): Validated<RuleConfig[]> {
  const parsed = parseConfig({ rules: raw });
  return parsed.ok ? { ok: true, value: parsed.value.rules } : parsed;
}

/** `reshard.from` and `shards` name the same set (the placement is of the set, not the order). */
function sameShards(shards: readonly string[], from: readonly string[]): boolean {
  const before = new Set(from);
  return before.size === shards.length && shards.every((name) => before.has(name));
}
