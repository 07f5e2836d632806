import * as v from "valibot";
import {
  DEFAULT_BREAKER,
  DEFAULT_DENIAL_CACHE_SIZE,
  DEFAULT_FALLBACK_MAX_ENTRIES,
  DEFAULT_FALLBACK_MAX_KEYS,
} from "../limiter/defaults";
import { integerIn, plainObject } from "./schema-parts";

// LIMITER_CONFIG knobs for what the limiter does when the store is slow or down (docs/failure-modes.md). Every field is optional; the defaults are the limiter's own.

/** An optional integer in [min, max], `fallback` when absent. */
const optionalIntegerIn = (min: number, max: number, fallback: number) =>
  v.optional(integerIn(min, max), fallback);

/** Per-isolate cache of denials. `maxEntries: 0` turns it off. */
const denialCacheSchema = plainObject(
  {
    /** Most keys remembered per isolate (least recently used leaves first); 0 turns it off. @default 10000 */
    maxEntries: optionalIntegerIn(0, 1_000_000, DEFAULT_DENIAL_CACHE_SIZE),
  },
  "must be an object with maxEntries",
);

/** The local sliding log used (fail-open rules only) while the store is down. */
const fallbackSchema = plainObject(
  {
    /** Off, a fail-open rule admits everything while the store is down. @default true */
    enabled: v.optional(v.boolean("must be true or false"), true),
    /** Share of the rule's limit each isolate admits on its own. @default 1 */
    fraction: v.optional(
      v.pipe(
        v.number("must be a number above 0 and at most 1"),
        v.gtValue(0, "must be a number above 0 and at most 1"),
        v.maxValue(1, "must be a number above 0 and at most 1"),
      ),
      1,
    ),
    /** Most keys remembered; the least recently used key is dropped first. @default 10000 */
    maxKeys: optionalIntegerIn(1, 1_000_000, DEFAULT_FALLBACK_MAX_KEYS),
    /** Most admissions remembered over all keys (~16 bytes each). @default 100000 */
    maxEntries: optionalIntegerIn(1, 10_000_000, DEFAULT_FALLBACK_MAX_ENTRIES),
  },
  "must be an object with enabled, fraction, maxKeys and/or maxEntries",
);

/** The circuit breaker in front of the store. */
const breakerSchema = plainObject(
  {
    /** Consecutive store failures that open it. @default 3 */
    failureThreshold: optionalIntegerIn(1, 1_000, DEFAULT_BREAKER.failureThreshold),
    /** First cool-down: no store call at all until it ends, then one probe. @default 1000 */
    cooldownMs: optionalIntegerIn(1, 600_000, DEFAULT_BREAKER.cooldownMs),
    /** The cool-down doubles after each failed probe, up to this. @default 30000 */
    maxCooldownMs: optionalIntegerIn(1, 3_600_000, DEFAULT_BREAKER.maxCooldownMs),
  },
  "must be an object with failureThreshold, cooldownMs and/or maxCooldownMs",
);

/** The entries to add to the top-level LIMITER_CONFIG schema. */
export const resilienceEntries = {
  /** Per-isolate cache of denials: a denied key is answered without the store until it resets. */
  denialCache: v.optional(denialCacheSchema, {}),
  /** The local limiter fail-open rules use while the store is down. */
  fallback: v.optional(fallbackSchema, {}),
  /** The circuit breaker in front of the store. */
  breaker: v.optional(breakerSchema, {}),
  /**
   * Concurrent checks of a key exhausted at its last answer wait for the one store call in
   * flight instead of each calling the store. @default true
   */
  singleFlight: v.optional(v.boolean("must be true or false"), true),
};
