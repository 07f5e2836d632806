// The weighted log's stored layout, as tests read and write it (src/store/lua/weighted-log-codec.lua.ts):
// the v2 header through BITFIELD (its bytes are binary: a GET through the REST bridge would not
// carry them as they are), the entries after it as text, and the v1 layout a deployment
// upgrading still holds, encoded here as the old code wrote it.
import type { Redis } from "@upstash/redis/cloudflare";

/** v2's header: 2-byte magic, start, end, n (u32), sum, exp (i64). */
export const HEADER_BYTES = 30;
const MAGIC = 0xfe57;

export interface LogHeader {
  magic: boolean;
  start: number;
  end: number;
  n: number;
  sum: number;
}

/** A v2 log's header, read as the scripts read it. */
export async function logHeader(redis: Redis, key: string): Promise<LogHeader> {
  // One BITFIELD as the scripts send it (the client's auto-pipeline refuses its builder).
  const read =
    "return redis.call('BITFIELD', KEYS[1], 'GET', 'u16', 0, 'GET', 'u32', 16, 'GET', 'u32', 48, 'GET', 'u32', 80, 'GET', 'i64', 112)";
  const [magic, start, end, n, sum] = (await redis.eval(read, [key], [])) as number[];
  return { magic: magic === MAGIC, start: start ?? 0, end: end ?? 0, n: n ?? 0, sum: sum ?? 0 };
}

/** A v2 log's entries, live and not yet compacted, as text. */
export async function logEntries(redis: Redis, key: string): Promise<string> {
  return (await redis.getrange(key, HEADER_BYTES, -1)) ?? "";
}

export interface V1Entry {
  member: string;
  at: number;
  units: number;
  state: "r" | "s" | "x";
}

const digits = (value: number, width: number) => String(value).padStart(width, "0");

/**
 * A log as the v1 code wrote it: the entries, then the 58-character trailer (`|W`, sum of the
 * live units in 16 digits, count 6, start 9, expiry 15, end 10). Every entry given is live.
 */
export function v1Log(entries: readonly V1Entry[], expiry: number): string {
  const body = entries
    .map((e) => `${e.member},${digits(e.at, 13)},${digits(e.units, 13)},${e.state};`)
    .join("");
  const sum = entries.reduce((total, e) => total + e.units, 0);
  return `${body}|W${digits(sum, 16)}${digits(entries.length, 6)}${digits(0, 9)}${digits(expiry, 15)}${digits(body.length, 10)}`;
}
