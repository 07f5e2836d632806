/**
 * Valibot building blocks, and the fields a LIMITER_CONFIG rule, a middleware rule and a /check
 * body share: one definition each, so a bound is checked and worded the same wherever it appears.
 */
import * as v from "valibot";
import { MAX_KEY_LENGTH } from "../bounded-key";
import {
  ALGORITHMS,
  type Algorithm,
  DEFAULT_ALGORITHM,
  unknownAlgorithm,
} from "../store/algorithm";
import {
  limitRange,
  MAX_CONCURRENCY_TIMEOUT_MS,
  MAX_USAGE_LIMIT,
  MAX_WINDOW_MS,
  MIN_WINDOW_MS,
  maxLimitOf,
} from "../store/caps";
import { DURATION_FORMS, parseDuration } from "./duration";
import { MAX_REQUEST_ID_LENGTH } from "./limits";
import { isPlainObject } from "./validation";

/** An integer in [min, max]; every failure says the range. */
export const integerIn = (min: number, max: number, message = integerRange(min, max)) =>
  v.pipe(v.number(message), v.integer(message), v.minValue(min, message), v.maxValue(max, message));

const integerRange = (min: number, max: number) => `must be an integer from ${min} to ${max}`;

/**
 * A strict object that is not an array (valibot's object schemas accept arrays as objects). Its
 * input type is the object's, so types inferred from it (RuleInput) keep the entries' fields.
 */
export const plainObject = <const T extends v.ObjectEntries>(entries: T, message: string) =>
  v.pipe(
    v.custom<v.InferInput<v.StrictObjectSchema<T, string>>>(isPlainObject, message),
    v.strictObject(entries, message),
  );

const WINDOW = `must be a duration from ${MIN_WINDOW_MS} ms to 7 days: ${DURATION_FORMS}`;

/** A window: an integer of ms or "500ms", "10s", "1m", "1 minute"…, from 1 ms to 7 days; → ms. */
export const windowSchema = v.pipe(
  v.custom<string | number>(
    (input) => typeof input === "string" || typeof input === "number",
    WINDOW,
  ),
  // Read once: the check and the value in one step.
  v.rawTransform(({ dataset, addIssue, NEVER }) => {
    const ms = parseDuration(dataset.value);
    if (ms !== undefined && ms >= MIN_WINDOW_MS && ms <= MAX_WINDOW_MS) return ms;
    addIssue({ message: WINDOW });
    return NEVER;
  }),
);

const TIMEOUT = `must be a duration from ${MIN_WINDOW_MS} ms to 1 day: ${DURATION_FORMS}`;

/** A concurrency slot's timeout: a duration from 1 ms to 1 day; → ms. */
export const timeoutSchema = v.pipe(
  v.custom<string | number>(
    (input) => typeof input === "string" || typeof input === "number",
    TIMEOUT,
  ),
  v.rawTransform(({ dataset, addIssue, NEVER }) => {
    const ms = parseDuration(dataset.value);
    if (ms !== undefined && ms >= MIN_WINDOW_MS && ms <= MAX_CONCURRENCY_TIMEOUT_MS) return ms;
    addIssue({ message: TIMEOUT });
    return NEVER;
  }),
);

/** How a policy counts, when named. A retired one says so. */
export const algorithmNameSchema = v.picklist(ALGORITHMS, (issue) => unknownAlgorithm(issue.input));

/** How a policy counts; absent, the default (the exact sliding log). */
export const algorithmSchema = v.optional(algorithmNameSchema, DEFAULT_ALGORITHM);

// A limit within its algorithm's cap (maxLimitOf), refused in limitRange's words. Built once per
// algorithm: /check picks one per request.
const limitOf = (algorithm: Algorithm) =>
  integerIn(1, maxLimitOf(algorithm), limitRange(algorithm));
const LIMITS = Object.fromEntries(ALGORITHMS.map((a) => [a, limitOf(a)])) as Record<
  Algorithm,
  ReturnType<typeof limitOf>
>;

/** A limit for a policy of this algorithm (/check knows it before the limit). */
export const limitSchemaOf = (algorithm: Algorithm) => LIMITS[algorithm];

/**
 * A rule's limit, before its algorithm (another field) is read: within the largest cap. The
 * rule's own algorithm's cap follows as a cross-field check (boundsIssue).
 */
export const limitSchema = integerIn(1, MAX_USAGE_LIMIT, limitRange("sliding-log"));

/** The cost of one request when none is given (stated once, in limiter/defaults.ts). */

/** A cost: an integer; from 1 to the policy's limit, which costFits checks (another field). */
export const costSchema = v.pipe(
  v.number("must be an integer from 1 to limit"),
  v.integer("must be an integer from 1 to limit"),
);

/** Whether a cost is one a policy with this limit can ever admit (1 to limit). */
export const costFits = (cost: number, limit: number) => cost >= 1 && cost <= limit;

/** What to decide when the store cannot answer. */
export const failModeSchema = v.picklist(["open", "closed"], 'must be "open" or "closed"');

/** A client key as /check takes it (an IP, an API key, a user id): any string, bounded. */
export const clientKeySchema = v.pipe(
  v.string(`must be a non-empty string of at most ${MAX_KEY_LENGTH} characters`),
  v.minLength(1, `must be a non-empty string of at most ${MAX_KEY_LENGTH} characters`),
  v.maxLength(MAX_KEY_LENGTH, `must be a non-empty string of at most ${MAX_KEY_LENGTH} characters`),
);

/** A request id as /check takes it ("requestId"): part of a Redis key, so bounded. */
export const requestIdSchema = v.pipe(
  v.string(`must be a non-empty string of at most ${MAX_REQUEST_ID_LENGTH} characters`),
  v.minLength(1, `must be a non-empty string of at most ${MAX_REQUEST_ID_LENGTH} characters`),
  v.maxLength(
    MAX_REQUEST_ID_LENGTH,
    `must be a non-empty string of at most ${MAX_REQUEST_ID_LENGTH} characters`,
  ),
);
