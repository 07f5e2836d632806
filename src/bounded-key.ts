/**
 * The one bound on client keys: no per-isolate structure and no Redis key holds a client key
 * longer than MAX_KEY_LENGTH UTF-16 units. Where a key enters:
 * - /check refuses a longer `key` with a 400 naming the field (config/schema-parts.ts): a
 *   service sending one has a bug it should hear about;
 * - "header:<name>" rules count the header's SHA-256 (64 hex characters, rules/client-key.ts);
 * - "ip" keys are an address as the limiter prints it;
 * - everything else (the middleware's `key()`, createLimiter's callers) is bounded here, by the
 *   limiter before any map or Redis key sees it: a longer key counts under its digest
 *   (boundedKey), so an app keyed on long tokens keeps working, each token in its own bucket.
 */
import { digestHex } from "./digest";

/** Longest client key stored as it is (UTF-16 units); docs/check-api.md "Limits". */
export const MAX_KEY_LENGTH = 512;

/**
 * What a digested key starts with. A shorter key that starts with it is digested too, so no key
 * can spell another key's digest: the mapping stays injective (up to SHA-256 collisions).
 */
export const DIGESTED_KEY_PREFIX = "#sha256:";

/** Whether `key` is counted under its digest rather than as it is. */
export function needsDigest(key: string): boolean {
  return (
    typeof key === "string" && (key.length > MAX_KEY_LENGTH || key.startsWith(DIGESTED_KEY_PREFIX))
  );
}

/**
 * `key` as the limiter stores it: itself, or `#sha256:` and the SHA-256 (hex) of its UTF-16
 * units (not UTF-8: a key() may return a lone surrogate, which UTF-8 cannot carry, and two keys
 * must not share a digest because of it). 72 characters, a fresh string: nothing of `key`, which
 * may be a view into a much larger string, is kept.
 */
export function boundedKey(key: string): string | Promise<string> {
  return needsDigest(key) ? digestedKey(key) : key;
}

async function digestedKey(key: string): Promise<string> {
  const units = new Uint8Array(key.length * 2);
  for (let i = 0; i < key.length; i++) {
    const unit = key.charCodeAt(i);
    units[2 * i] = unit & 0xff;
    units[2 * i + 1] = unit >> 8;
  }
  return DIGESTED_KEY_PREFIX + (await digestHex("SHA-256", units));
}

const DIGESTED_KEY = /^#sha256:[0-9a-f]{64}$/;

/**
 * Whether `key` is a digest as boundedKey makes one: what a decision's concurrency slot carries
 * for a long key (its key as counted). A client's own key may spell one too (it is then counted
 * under its digest), so a release tries both (release-slots.ts).
 */
export function isDigestedKey(key: string): boolean {
  return DIGESTED_KEY.test(key);
}
