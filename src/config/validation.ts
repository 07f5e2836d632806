import { isWellFormed } from "../utf16";

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

/** The first key of `object` not in `allowed`, so typos ("limt") are reported, not ignored. */
export function unknownField(object: Record<string, unknown>, allowed: readonly string[]) {
  return Object.keys(object).find((key) => !allowed.includes(key));
}

/**
 * Whether JSON text may parse to a string (or field name) that is not well-formed UTF-16: it
 * holds a surrogate code unit, or a \u escape of one (`\ud800`, any case). False proves every
 * string of the parsed value well-formed, so illFormedString's walk can be skipped: one regex
 * over the text instead of a walk over the value per request. A false positive
 * (`\\ud800`, an escaped backslash) only costs the walk.
 */
export function mayHoldLoneSurrogate(json: string): boolean {
  return SURROGATE_OR_ITS_ESCAPE.test(json);
}

const SURROGATE_OR_ITS_ESCAPE = /[\uD800-\uDFFF]|\\u[dD][89abcdefABCDEF]/;

/**
 * The first string in a parsed JSON value (a value, or a field name) that is not well-formed
 * UTF-16, named by its path (`key`, `rules[1]`, `rules[0].name`); undefined when there is none.
 * JSON can carry a lone surrogate ("\ud800") that no UTF-8 encoder (a Redis key, a log line, a
 * header) can represent faithfully: refused once here, for every field, rather than per field.
 * A field name is reported at its object's path (`root` at the top). Iterative: a body may nest
 * thousands deep.
 */
export function illFormedString(
  value: unknown,
  root: string,
): { ok: false; field: string; detail: string } | undefined {
  const stack: [unknown, string][] = [[value, ""]];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [item, path] = next;
    if (typeof item === "string") {
      if (!isWellFormed(item)) {
        return invalid(path || root, "must be well-formed UTF-16 (it holds a lone surrogate)");
      }
    } else if (Array.isArray(item)) {
      for (let i = item.length - 1; i >= 0; i--) stack.push([item[i], `${path}[${i}]`]);
    } else if (isPlainObject(item)) {
      const entries = Object.entries(item);
      for (const [name] of entries) {
        if (!isWellFormed(name)) {
          return invalid(
            path || root,
            "has a field name that is not well-formed UTF-16 (it holds a lone surrogate)",
          );
        }
      }
      for (let i = entries.length - 1; i >= 0; i--) {
        const [name, child] = entries[i] as [string, unknown];
        stack.push([child, path ? `${path}.${name}` : name]);
      }
    }
  }
  return undefined;
}
