const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const DURATION = /^(\d{1,15})\s?(ms|s|m|h|d)$/;

/**
 * A duration as `/check` and LIMITER_CONFIG spell it: an integer of ms, or "500ms", "10s", "1m",
 * "1h", "1d". Returns ms, or undefined when the value is not a duration.
 */
export function parseDuration(value: unknown): number | undefined {
  if (typeof value === "number") return Number.isSafeInteger(value) ? value : undefined;
  if (typeof value !== "string") return undefined;
  const match = DURATION.exec(value.trim());
  if (!match) return undefined;
  const ms = Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
  return Number.isSafeInteger(ms) ? ms : undefined;
}
