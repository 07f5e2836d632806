const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * Unit names as written here ("10s", "1m") and as @upstash/ratelimit users write them ("10 s",
 * "10 sec", "1 minute", "2 hours"), to the unit they mean.
 */
const UNITS: Readonly<Record<string, keyof typeof UNIT_MS>> = {
  ms: "ms",
  millisecond: "ms",
  milliseconds: "ms",
  s: "s",
  sec: "s",
  secs: "s",
  second: "s",
  seconds: "s",
  m: "m",
  min: "m",
  mins: "m",
  minute: "m",
  minutes: "m",
  h: "h",
  hr: "h",
  hrs: "h",
  hour: "h",
  hours: "h",
  d: "d",
  day: "d",
  days: "d",
};
const DURATION = /^(\d{1,15})\s*([a-z]+)$/;

/** The forms a duration takes, for error messages. */
export const DURATION_FORMS =
  'an integer of ms, or a number and a unit: "500ms", "10s", "1m", "1h", "1d" (or "10 sec", "1 minute", "2 hours", "1 day")';

/**
 * A duration as `/check` and LIMITER_CONFIG spell it: an integer of ms, or a number and a unit
 * (ms, s, m, h, d, or their names: "10 sec", "1 minute"; case-insensitive). Returns ms, or
 * undefined when the value is not a duration.
 */
export function parseDuration(value: unknown): number | undefined {
  if (typeof value === "number") return Number.isSafeInteger(value) ? value : undefined;
  if (typeof value !== "string") return undefined;
  const match = DURATION.exec(value.trim().toLowerCase());
  const name = match?.[2];
  // Own names only: "constructor" is not a unit.
  const unit = name !== undefined && Object.hasOwn(UNITS, name) ? UNITS[name] : undefined;
  if (!match || unit === undefined) return undefined;
  const ms = Number(match[1]) * UNIT_MS[unit];
  return Number.isSafeInteger(ms) ? ms : undefined;
}
