/**
 * Well-formed UTF-16: a shared leaf (config/ validates with it, store/ encodes keys with it).
 * A lone surrogate is a high one not followed by a low one, or a low one not preceded by a high
 * one. (A regex, not String.prototype.isWellFormed: ES2022, our TS lib, does not declare it, and
 * runtimes older than Node 20 lack it.)
 */

/** Matches one lone surrogate, captured (`split` keeps it as its own part). */
export const LONE_SURROGATE =
  /([\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF])/;

/** True when `text` is well-formed UTF-16 (no lone surrogate), so it can be encoded as UTF-8. */
export function isWellFormed(text: string): boolean {
  return !LONE_SURROGATE.test(text);
}
