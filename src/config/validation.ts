/** A validation outcome that names the offending field, so a 400 or 503 can say what is wrong. */
export type Validated<T> = { ok: true; value: T } | { ok: false; field: string; detail: string };

export function invalid(
  field: string,
  detail: string,
): { ok: false; field: string; detail: string } {
  return { ok: false, field, detail };
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function isIntegerIn(value: unknown, min: number, max: number): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= min && value <= max;
}

/** The first key of `object` not in `allowed`, so typos ("limt") are reported, not ignored. */
export function unknownField(object: Record<string, unknown>, allowed: readonly string[]) {
  return Object.keys(object).find((key) => !allowed.includes(key));
}
