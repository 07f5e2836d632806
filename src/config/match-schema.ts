/**
 * Which requests a rule applies to (its `match`): path patterns, methods, case. Part of the one
 * rule shape (rule-schema.ts); the matching itself is rules/match.ts.
 */
import * as v from "valibot";
import { plainObject } from "./schema-parts";

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
export const matchSchema = v.pipe(
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
