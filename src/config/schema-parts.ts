import * as v from "valibot";
import { isPlainObject } from "./validation";

// Valibot building blocks shared by the LIMITER_CONFIG schemas (limiter-config.ts and
// resilience-config.ts), so a bound is worded the same wherever it appears.

/** An integer in [min, max]; every failure says the range. */
export const integerIn = (min: number, max: number) =>
  v.pipe(
    v.number(`must be an integer from ${min} to ${max}`),
    v.integer(`must be an integer from ${min} to ${max}`),
    v.minValue(min, `must be an integer from ${min} to ${max}`),
    v.maxValue(max, `must be an integer from ${min} to ${max}`),
  );

/** A strict object that is not an array (valibot's object schemas accept arrays as objects). */
export const plainObject = <const T extends v.ObjectEntries>(entries: T, message: string) =>
  v.pipe(
    v.custom<Record<string, unknown>>(isPlainObject, message),
    v.strictObject(entries, message),
  );
