/**
 * A usage rule's `usage` (docs/usage.md): where what a request really cost is read when its
 * response ends, a header (or trailer) holding an integer, or fields of a JSON body (or of an
 * event stream's `data:` events), summed. Read as `{ header }` (lower-cased) or `{ json: paths }`
 * (always a list).
 */
import * as v from "valibot";
import { type Algorithm, USAGE_ALGORITHMS } from "../store/algorithm";
import { plainObject } from "./schema-parts";
import { invalid } from "./validation";

/** The most JSON paths one usage sums (Anthropic's needs 2). */
const MAX_USAGE_PATHS = 8;
/** Bounds on a header name and a path: read on every response, so kept short. */
const MAX_NAME_LENGTH = 128;

const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;
const HEADER_RULE = `must be a header name (1 to ${MAX_NAME_LENGTH} token characters)`;
const headerSchema = v.pipe(
  v.string(HEADER_RULE),
  v.regex(HEADER_NAME, HEADER_RULE),
  v.maxLength(MAX_NAME_LENGTH, HEADER_RULE),
  v.toLowerCase(),
);

const PATH_RULE = `must be a dot-separated path of non-empty segments ("usage.total_tokens"), at most ${MAX_NAME_LENGTH} characters`;
const pathSchema = v.pipe(
  v.string(PATH_RULE),
  v.maxLength(MAX_NAME_LENGTH, PATH_RULE),
  v.check((path) => path.split(".").every((segment) => segment.length > 0), PATH_RULE),
);
const PATHS_RULE = `must be a path or a list of 1 to ${MAX_USAGE_PATHS} paths`;

const USAGE_RULE = 'must be {"header": "<name>"} or {"json": "<path>" | ["<path>", …]}';

/** Where a usage rule reads what a request used. */
export const usageSchema = v.pipe(
  plainObject(
    {
      /** A response header or trailer holding the units used (an integer). */
      header: v.optional(headerSchema),
      /** Fields of a JSON body, or of an event stream's `data:` events (the last that has them). */
      json: v.optional(
        v.union(
          [
            pathSchema,
            v.pipe(
              v.array(pathSchema, PATHS_RULE),
              v.minLength(1, PATHS_RULE),
              v.maxLength(MAX_USAGE_PATHS, PATHS_RULE),
            ),
          ],
          PATHS_RULE,
        ),
      ),
    },
    USAGE_RULE,
  ),
  v.check((spec) => (spec.header === undefined) !== (spec.json === undefined), USAGE_RULE),
  v.transform(
    (spec): UsageSpec =>
      spec.header !== undefined ? { header: spec.header } : { json: [spec.json ?? []].flat() },
  ),
);

/**
 * Why `usage` is refused with another algorithm: a settle charges (or gives back) the request's
 * units where they were counted, which the token bucket and the sliding counter do not keep (a
 * debt that drains with time; a window that fades into the next one's weight), nor a
 * concurrency rule (slots, not units).
 */
const USAGE_NEEDS_COUNT =
  'applies to "sliding-log" (counted weighted), "sliding-log-weighted", "fixed-window" and calendar quotas ("period"): a settle charges the window or period the request was counted in, which "token-bucket" (a debt that drains) and "sliding-counter" (a window that fades into the next) do not keep';

/**
 * A usage spec as read: a lower-cased header name, or a list of dot-separated JSON paths (the
 * shape the streaming reader, usage-reader.ts, takes).
 */
export type UsageSpec = { header: string } | { json: readonly string[] };

/** The algorithm a rule counts in (the default: the sliding log), weighted for a usage rule. */
export function countedIn<A extends Algorithm>(
  usage: UsageSpec | undefined,
  algorithm: A | undefined,
): A | "sliding-log" | "sliding-log-weighted" {
  if (algorithm === undefined) return usage ? "sliding-log-weighted" : "sliding-log";
  return usage && algorithm === "sliding-log" ? "sliding-log-weighted" : algorithm;
}

/** A usage rule on an algorithm a settle cannot charge exactly, refused naming `rules[i].usage`. */
export function usageIssue(
  rule: { usage?: UsageSpec | undefined; algorithm: Algorithm },
  index: number,
): { ok: false; field: string; detail: string } | undefined {
  if (!rule.usage || USAGE_ALGORITHMS.has(rule.algorithm)) return undefined;
  return invalid(`rules[${index}].usage`, USAGE_NEEDS_COUNT);
}
