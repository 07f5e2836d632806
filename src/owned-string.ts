/**
 * A copy of `text` that keeps no larger string alive: what a per-isolate cache stores when it
 * keeps a string it was handed.
 *
 * V8 (workerd's engine) represents a substring of 13 or more characters (`slice`, `split`'s
 * parts, `trim`) as a view into its parent, and a concatenation as a pair of pointers: either
 * keeps the whole parent alive. A 40-character key cut from a 1 MB header, kept as a Map key,
 * keeps the megabyte for as long as the entry lives (measured: test/src/limiter/isolate-memory.node.test.ts).
 * Prepending a character makes a concatenation that `slice` must first flatten into a fresh
 * buffer of the key's own length + 1: the copy points at that buffer, never at the parent.
 * Shorter strings are never views (V8 copies them), so they are returned as they are.
 */
export function ownedString(text: string): string {
  // (typeof: a plain-JS caller's key may be anything; it is used as it is.)
  return typeof text === "string" && text.length >= 13 ? ` ${text}`.slice(1) : text;
}

/**
 * What a string is accounted as in a per-isolate byte budget: 2 bytes a UTF-16 unit (V8 stores
 * Latin-1 strings in 1, so this is an upper bound) plus its header.
 */
export function stringBytes(text: string): number {
  return 2 * text.length + STRING_HEADER_BYTES;
}

/** A V8 string's header (map, hash, length), rounded up. */
const STRING_HEADER_BYTES = 16;
