import * as v from "valibot";
import { DEFAULT_BREAKER } from "../limiter/circuit-breaker";
import { DEFAULT_DENIAL_CACHE_SIZE } from "../limiter/denial-cache";
import {
  DEFAULT_FALLBACK_MAX_ENTRIES,
  DEFAULT_FALLBACK_MAX_KEYS,
} from "../limiter/fallback-limiter";
import { integerIn, plainObject } from "./schema-parts";

// LIMITER_CONFIG knobs for what the limiter does when the store is slow or down (README
// "Failure modes"). Every field is optional; the defaults are the limiter's own.

/** An optional integer in [min, max], `fallback` when absent. */
const optionalIntegerIn = (min: number, max: number, fallback: number) =>
  v.optional(integerIn(min, max), fallback);

/** Per-isolate cache of denials. `maxEntries: 0` turns it off. */
export const denialCacheSchema = plainObject(
  { maxEntries: optionalIntegerIn(0, 1_000_000, DEFAULT_DENIAL_CACHE_SIZE) },
  "must be an object with maxEntries",
);

/** The local sliding log used (fail-open rules only) while the store is down. */
export const fallbackSchema = plainObject(
  {
    enabled: v.optional(v.boolean("must be true or false"), true),
    fraction: v.optional(
      v.pipe(
        v.number("must be a number above 0 and at most 1"),
        v.gtValue(0, "must be a number above 0 and at most 1"),
        v.maxValue(1, "must be a number above 0 and at most 1"),
      ),
      1,
    ),
    maxKeys: optionalIntegerIn(1, 1_000_000, DEFAULT_FALLBACK_MAX_KEYS),
    maxEntries: optionalIntegerIn(1, 10_000_000, DEFAULT_FALLBACK_MAX_ENTRIES),
  },
  "must be an object with enabled, fraction, maxKeys and/or maxEntries",
);

export const breakerSchema = plainObject(
  {
    failureThreshold: optionalIntegerIn(1, 1_000, DEFAULT_BREAKER.failureThreshold),
    cooldownMs: optionalIntegerIn(1, 600_000, DEFAULT_BREAKER.cooldownMs),
    maxCooldownMs: optionalIntegerIn(1, 3_600_000, DEFAULT_BREAKER.maxCooldownMs),
  },
  "must be an object with failureThreshold, cooldownMs and/or maxCooldownMs",
);

/** The entries to add to the top-level LIMITER_CONFIG schema. */
export const resilienceEntries = {
  denialCache: v.optional(denialCacheSchema, {}),
  fallback: v.optional(fallbackSchema, {}),
  breaker: v.optional(breakerSchema, {}),
  singleFlight: v.optional(v.boolean("must be true or false"), true),
};

export interface ResilienceConfig {
  denialCache: v.InferOutput<typeof denialCacheSchema>;
  fallback: v.InferOutput<typeof fallbackSchema>;
  breaker: v.InferOutput<typeof breakerSchema>;
  /** @default true */
  singleFlight: boolean;
}
